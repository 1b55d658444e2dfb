"""Rooflines and memory (notebooks 06 roofline, 07 memory and layout), and the facts of
notebooks 06 to 08 (the launch counts of notebook 08 are computed by
:mod:`yolo_sm.topics.launches.analyse`).

Which layers are bound by memory bandwidth and which by compute, what activations cost in memory
and what the NCHW layout costs in transform kernels.

Two kinds of roofline:

* **absolute** (YOLOv8): FLOPs and bytes per layer from the ``model_layers`` table (a
  shape-only count of every model and layer, :mod:`yolo_sm.core.model_tables`) against the
  layer's measured kernel time from Nsight Compute -> achieved TFLOP/s and GB/s, under the
  ceilings measured on the same machine (the root's ``ceilings`` table,
  :mod:`yolo_sm.contract.hardware`); a root without them has no absolute roofline.
* **normalised** (ResNet-101, wide conv stack, YOLOv8): Nsight Compute's ``sm_throughput_pct``
  and ``dram_throughput_pct`` are each a percentage of the hardware's own peak, so no ceiling
  has to be assumed: a kernel near 100 % DRAM and low SM is bandwidth-bound, the reverse
  compute-bound.

Bytes are a lower bound on traffic: ``min_bytes`` counts the weights, the layer's inputs and its
output once (what a fully fused layer would have to move); ``conv_bytes`` counts every convolution
inside the layer reading its input and weights and writing its output (what unfused eager convs
move). Eager PyTorch moves more still: its bias, activation and residual kernels re-read and
re-write activations.

:func:`facts` reads all of it from a dataset root as numbers; the rules that judge them are in
:mod:`yolo_sm.topics.roofline.rules` (and the article claims' rules).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.hardware import (
    CEILINGS,
    peak_copy_gbps,
    peak_fp16_tflops,
    roofline_ceilings,
)
from yolo_sm.contract.labels import parse_config
from yolo_sm.contract.labels import with_config as _with_config
from yolo_sm.topics.launches.analyse import launch_facts
from yolo_sm.topics.launches.analyse import width_scope as _w

# the datasets this module reads (short names inside a root)
MODEL_LAYERS = "model_layers"
NCU_YOLO = "ncu_width_b8"
NCU_RESNET = "ncu_resnet101"
NCU_WIDE = "ncu_wide_stack"
NCU_THROUGHPUT = "ncu_throughput_w1"
NCU_LAYOUT = "ncu_precision_w1"

#: A throughput at or above this percentage of its peak counts as "high" in the tables' ``bound``
#: column and the plots' bands (Nsight Compute's speed-of-light guidance treats ~60 % as good use
#: of a unit). The facts carry the percentages themselves.
HIGH_PCT = 60.0
BOUNDS = ("memory-bound", "compute-bound", "neither (latency / under-used)")
THROUGHPUT_COLS = (
    "achieved_occupancy_pct",
    "sm_throughput_pct",
    "dram_throughput_pct",
    "tensor_pipe_pct",
)
#: ResNet stages the facts call early and deep.
EARLY, DEEP = ("stem", "layer1"), ("layer3", "layer4")
RESNET_STAGES = ("stem", "layer1", "layer2", "layer3", "layer4", "head")
#: The columns of :func:`roofline_table` worth reading first.
ROOF_COLUMNS = (
    "width",
    "layer",
    "module_type",
    "kernels",
    "time_us",
    "flops_batch",
    "min_bytes",
    "conv_bytes",
    "intensity",
    "conv_intensity",
    "achieved_tflops",
    "achieved_gbps",
    "pct_of_roof",
    "side",
)


def with_config(df, col: str = "config"):
    """A copy of ``df`` with family, width, precision, layout and batch parsed from ``col``."""
    return _with_config(df, col, strict=True)


# ---------------------------------------------------------------- counted traffic (model_layers)


def model_rows(layers, model: str = "yolov8", width: float | None = None, max_channels=None):
    """The rows of one model of the ``model_layers`` table (``width``: one width only;
    ``max_channels``: YOLO models with that cap, default the uncapped 2048 where the table
    has several), in forward order."""
    d = layers[layers.model == model]
    if width is not None:
        d = d[np.isclose(d.width, float(width))]
    if "max_channels" in d and d.max_channels.notna().any():
        caps = d.max_channels.dropna().unique()
        cap = max_channels if max_channels is not None else (2048 if 2048 in caps else max(caps))
        d = d[d.max_channels == cap]
    if d.empty:
        raise UserError(
            f"model_layers has no rows of {model}"
            + (f" at width {width:g}" if width is not None else "")
            + (f" with max_channels {max_channels}" if max_channels is not None else "")
        )
    return d.sort_values(["width", "index"]).reset_index(drop=True)


def traffic(
    layers,
    model: str = "yolov8",
    width: float = 1.0,
    batch: int = 1,
    bytes_per_element: int = 2,
    max_channels=None,
):
    """One model's rows of ``model_layers`` scaled to ``batch`` images at ``bytes_per_element``:
    ``flops_batch``, ``weight_bytes`` (once per forward), ``in_bytes``, ``out_bytes``,
    ``min_bytes``, ``conv_bytes``, and the arithmetic intensities ``intensity`` = flops /
    min_bytes and ``conv_intensity`` = flops / conv_bytes (FLOP/byte)."""
    d = model_rows(layers, model, width, max_channels).copy()
    scale = bytes_per_element / d.bytes_per_element
    per_image = batch / d.batch
    d["weight_bytes"] = (d.weight_bytes * scale).astype("int64")
    d["in_bytes"] = (d.in_bytes * scale * per_image).astype("int64")
    d["out_bytes"] = (d.out_bytes * scale * per_image).astype("int64")
    d["min_bytes"] = d.weight_bytes + d.in_bytes + d.out_bytes
    w = (d.conv_weight_bytes * scale).astype("int64")
    d["conv_bytes"] = (d.conv_io_bytes * scale * per_image).astype("int64") + w
    d["flops_batch"] = d.flops * batch
    d["batch"] = batch
    d["bytes_per_element"] = bytes_per_element
    d["intensity"] = d.flops_batch / d.min_bytes
    d["conv_intensity"] = (d.flops_batch / d.conv_bytes).where(d.conv_bytes > 0)
    return d


def activation_table(layers, widths=None, model: str = "yolov8"):
    """Per width and layer of ``model``: output activation MB per image and weight MB (at the
    table's element size, fp16), with a ``label`` (``model.4 C2f``)."""
    d = model_rows(layers, model)
    if widths is not None:
        d = d[d.width.isin([float(w) for w in widths])]
    return d.assign(
        activation_mb=d.out_bytes / 1e6,
        weight_mb=d.weight_bytes / 1e6,
        label=d.layer + " " + d.module_type,
    ).reset_index(drop=True)


def width_exponent(act, col: str) -> float:
    """The power of width that ``col`` summed over layers grows with: the slope of log(sum)
    against log(width) between the narrowest and the widest width of ``act``
    (:func:`activation_table`): 1 linear, 2 quadratic."""
    tot = act.groupby("width")[col].sum()
    if len(tot) < 2:
        return math.nan
    lo, hi = tot.index.min(), tot.index.max()
    return float(np.log(tot[hi] / tot[lo]) / np.log(hi / lo))


# ---------------------------------------------------------------- absolute roofline (YOLOv8)


def layer_times(ncu, by=("config", "layer")):
    """Kernel count and summed kernel time (us) per config and layer of a per-kernel table."""
    g = ncu.groupby(list(by), observed=True).duration_us.agg(kernels="size", time_us="sum")
    return g.reset_index()


def roofline_table(
    ncu,
    layers,
    peak_tflops: float,
    peak_gbps: float,
    widths=None,
    family: str = "yolov8",
    source: str = "",
):
    """One row per (config, layer) of a YOLO Nsight Compute table: FLOPs and bytes from
    ``layers`` (``model_layers``) at the config's width, batch and element size, measured kernel
    time, achieved TFLOP/s and GB/s (of ``min_bytes``), the roof at the layer's intensity under
    ``peak_tflops`` / ``peak_gbps``, the share of it achieved, and the side of the ridge point
    (``memory`` below it, ``compute`` above; zero-FLOP layers: ``memory``). ``attrs``: the
    ceilings, the ridge point and ``ceilings_from`` (``source``: where they were measured)."""
    peak_tflops, peak_gbps = float(peak_tflops), float(peak_gbps)
    times = layer_times(ncu)
    rows = []
    for cfg, t in times.groupby("config"):
        c = parse_config(cfg)
        if c["family"] != family or (widths is not None and c["width"] not in widths):
            continue
        bpe = 4 if c["precision"] in ("fp32", "tf32") else 2
        lt = traffic(layers, family, c["width"], c["batch"], bpe)
        lt = lt.drop(columns=[k for k in c if k in lt and k != "width"])
        rows.append(t.merge(lt.drop(columns="width"), on="layer", how="inner").assign(**c))
    if not rows:
        raise UserError("no config of the table matches the requested family / widths")
    df = pd.concat(rows, ignore_index=True)
    sec = df.time_us * 1e-6
    df["achieved_tflops"] = df.flops_batch / sec / 1e12
    df["achieved_gbps"] = df.min_bytes / sec / 1e9
    df["conv_gbps"] = df.conv_bytes / sec / 1e9
    roof = np.minimum(peak_tflops, df.intensity * peak_gbps / 1e3)
    df["roof_tflops"] = roof
    df["pct_of_roof"] = np.where(df.flops > 0, 100 * df.achieved_tflops / roof, np.nan)
    df["pct_of_peak_gbps"] = 100 * df.achieved_gbps / peak_gbps
    ridge = peak_tflops * 1e3 / peak_gbps
    df["side"] = np.where(df.intensity >= ridge, "compute", "memory")
    out = df.sort_values(["width", "index"]).reset_index(drop=True)
    out.attrs.update(
        peak_tflops=peak_tflops, peak_gbps=peak_gbps, ridge=ridge, ceilings_from=source
    )
    return out


def root_roofline(root: DataRoot, widths=None):
    """:func:`roofline_table` of ``root``'s YOLOv8 Nsight Compute table under the ceilings
    measured on the same machine (``ceilings``); raises :class:`UserError` naming what the
    root lacks."""
    need = [n for n in (NCU_YOLO, MODEL_LAYERS, CEILINGS) if not root.has(n)]
    peaks = roofline_ceilings(root)
    if need or peaks is None:
        raise UserError(f"{root.name} lacks {', '.join(need) or 'the fp16 matmul or copy ceiling'}")
    pk, bw = peak_fp16_tflops(root), peak_copy_gbps(root)
    return roofline_table(
        root.load(NCU_YOLO),
        root.load(MODEL_LAYERS),
        *peaks,
        widths=widths,
        source=f"{pk[1]} and {bw[1]}, measured on {root.device_name()}",
    )


def side_summary(table):
    """Per width: layers and time below / above the ridge point, and the time-weighted share of
    the roof achieved by the layers with FLOPs."""

    def agg(g):
        f = g[g.flops > 0]
        return pd.Series(
            {
                "layers": len(g),
                "time_us": g.time_us.sum(),
                "memory_side_layers": int((g.side == "memory").sum()),
                "memory_side_time_share": g.time_us[g.side == "memory"].sum() / g.time_us.sum(),
                "tflops_forward": g.flops_batch.sum() / g.time_us.sum() / 1e6,
                "pct_of_roof_tw": (f.pct_of_roof * f.time_us).sum() / f.time_us.sum(),
                "median_intensity": f.intensity.median(),
            }
        )

    return table.groupby("width")[list(table.columns)].apply(agg).reset_index()


# ---------------------------------------------------------------- normalised roofline (ncu %)


def bound_of(sm_pct, dram_pct, high: float = HIGH_PCT):
    """``memory-bound`` where DRAM throughput >= ``high`` % and >= SM throughput,
    ``compute-bound`` where SM throughput >= ``high`` % and above DRAM, else ``neither``.
    Works on scalars and on pandas Series."""
    sm, dram = np.asarray(sm_pct, dtype=float), np.asarray(dram_pct, dtype=float)
    out = np.where(
        (dram >= high) & (dram >= sm),
        BOUNDS[0],
        np.where((sm >= high) & (sm > dram), BOUNDS[1], BOUNDS[2]),
    )
    return out if out.ndim else str(out)


def throughput_view(ncu, by, high: float = HIGH_PCT, cols=THROUGHPUT_COLS):
    """Per group: kernels, time, time-weighted achieved occupancy, SM / DRAM / tensor-pipe
    throughput (% of peak), the bound of the group's averages (:func:`bound_of`), and the share of
    its time spent in kernels that are each bound on their own (kernels differ within a stage).
    Of ``cols``, those the table lacks (a throughput set without achieved occupancy) are left
    out."""

    by = [by] if isinstance(by, str) else list(by)
    df = ncu.assign(bound=bound_of(ncu.sm_throughput_pct, ncu.dram_throughput_pct, high))
    out = time_weighted(df, by, [c for c in cols if c in ncu])
    out["bound"] = bound_of(out.sm_throughput_tw_pct, out.dram_throughput_tw_pct, high)
    shares = (
        df.pivot_table(index=by, columns="bound", values="duration_us", aggfunc="sum")
        .reindex(columns=list(BOUNDS))
        .fillna(0.0)
    )
    shares = shares.div(shares.sum(axis=1), axis=0)
    shares.columns = [f"time_share_{b.split(' ')[0]}" for b in shares.columns]
    out = out.merge(shares.reset_index(), on=by, how="left")
    out["time_share"] = out.time_us / out.time_us.sum()
    return out


def resnet_stages(ncu, layers, model: str = "resnet101", high: float = HIGH_PCT):
    """ResNet stages (stem, layer1-4, head) in forward order: :func:`throughput_view` per stage
    joined with FLOPs and bytes of ``model`` from ``layers`` (``model_layers``) at the table's
    batch, and achieved TFLOP/s. Kernels outside every stage range (layer '') are left out."""

    cfg = parse_config(ncu.config.iloc[0])
    k = ncu[ncu.layer.isin(RESNET_STAGES)]
    view = throughput_view(k, "layer", high)
    lt = traffic(layers, model, 1.0, cfg["batch"])
    cols = ["index", "layer", "flops_batch", "min_bytes", "intensity", "params"]
    out = lt[cols].merge(view, on="layer", how="inner").sort_values("index")
    out["achieved_tflops"] = out.flops_batch / (out.time_us * 1e-6) / 1e12
    return out.reset_index(drop=True)


def stage_mean(stages, names, col: str) -> float:
    """The time-weighted mean of ``col`` over the stages ``names`` of :func:`resnet_stages`."""
    g = stages.set_index("layer").loc[list(names)]
    return float((g[col] * g.time_us).sum() / g.time_us.sum())


# ---------------------------------------------------------------- YOLOv8: occupancy vs throughput

#: Theoretical occupancy (%) at which the occupancy split cuts (the article claim's 60 %).
OCC_CUT = 60.0
#: The columns a side of :func:`yolo_occupancy_vs_throughput` is averaged over (time-weighted).
YOLO_THROUGHPUT_COLS = (
    "theoretical_occupancy_pct",
    "sm_throughput_pct",
    "tensor_pipe_pct",
    "dram_throughput_pct",
)


def _sides(cut: float) -> tuple[str, str]:
    return f"< {cut:g} %", f">= {cut:g} %"


def yolo_kernels(ncu, cut: float = OCC_CUT):
    """A YOLO Nsight Compute per-kernel table (e.g. ``h200/ncu_throughput_w1``) with the config
    parsed (:func:`with_config`), ``kernel_class``
    (:func:`yolo_sm.analyse.kernels.add_kernel_class`),
    ``blocks_per_sm`` (resident blocks per SM: the smallest of the ``limit_*`` columns) and
    ``occupancy``, the side of ``cut`` its theoretical occupancy falls on."""
    if ncu is None or len(ncu) == 0:
        raise UserError("no kernels: the Nsight Compute table is absent or empty")
    df = with_config(ncu if "kernel_class" in ncu else add_kernel_class(ncu))
    limits = [c for c in df.columns if c.startswith("limit_")]
    if limits:
        df["blocks_per_sm"] = df[limits].min(axis=1)
    below, above = _sides(cut)
    df["occupancy"] = np.where(df.theoretical_occupancy_pct < cut, below, above)
    return df


def yolo_occupancy_vs_throughput(ncu, cut: float = OCC_CUT, high: float = HIGH_PCT):
    """Per config (width) and side of ``cut`` % theoretical occupancy (both sides, an empty one
    with 0 kernels): kernels, time, ``time_share`` of the config's kernel time, the
    time-weighted theoretical occupancy, SM / tensor-pipe / DRAM throughput (% of peak) and bound
    (:func:`throughput_view`), the occupancy range, the share of the side's time at one resident
    block per SM (``one_block_time_share``) and its kernel classes by time (``classes``)."""
    df = yolo_kernels(ncu, cut)
    keys = ["config", "width", "occupancy"]
    view = throughput_view(df, keys, high, YOLO_THROUGHPUT_COLS)
    g = df.groupby(keys)
    extra = pd.DataFrame(
        {
            "occupancy_min_pct": g.theoretical_occupancy_pct.min(),
            "occupancy_max_pct": g.theoretical_occupancy_pct.max(),
            "classes": g[["kernel_class", "duration_us"]].apply(
                lambda k: ", ".join(
                    k.groupby("kernel_class").duration_us.sum().sort_values(ascending=False).index
                )
            ),
        }
    )
    if "blocks_per_sm" in df:
        one = df.duration_us.where(df.blocks_per_sm == 1, 0.0)
        extra["one_block_time_share"] = (
            one.groupby([df[k] for k in keys]).sum() / g.duration_us.sum()
        )
    view = view.merge(extra.reset_index(), on=keys, how="left")
    full = (
        df[["config", "width"]]
        .drop_duplicates()
        .merge(pd.DataFrame({"occupancy": list(_sides(cut))}), how="cross")
    )
    out = full.merge(view, on=keys, how="left")
    out[["kernels", "time_us"]] = out[["kernels", "time_us"]].fillna(0)
    out["kernels"] = out.kernels.astype(int)
    out["time_share"] = out.time_us / out.groupby("config").time_us.transform("sum")
    out.attrs["cut"] = cut
    return out.sort_values(["width", "occupancy"], ascending=[True, False]).reset_index(drop=True)


def yolo_stage_throughput(ncu, cut: float = OCC_CUT, high: float = HIGH_PCT):
    """Per config (width) and stage (backbone, neck, head, forward order):
    :func:`throughput_view` with the stage's ``time_share`` of the config's kernel time and the
    share of the stage's time in kernels under ``cut`` % theoretical occupancy."""
    df = yolo_kernels(ncu, cut)
    keys = ["config", "width", "stage"]
    out = throughput_view(df, keys, high, YOLO_THROUGHPUT_COLS)
    out["time_share"] = out.time_us / out.groupby("config").time_us.transform("sum")
    below = df.duration_us.where(df.occupancy == _sides(cut)[0], 0.0)
    low = below.groupby([df[k] for k in keys]).sum() / df.groupby(keys).duration_us.sum()
    out = out.merge(low.rename("low_occupancy_time_share").reset_index(), on=keys, how="left")
    order = list(df.sort_values("kernel_id").stage.drop_duplicates()) if "kernel_id" in df else None
    out["stage"] = pd.Categorical(out.stage, categories=order or sorted(out.stage.unique()))
    out.attrs["cut"] = cut
    return out.sort_values(["width", "stage"]).reset_index(drop=True)


def occupancy_sides(split):
    """(under, at or above): the rows of :func:`yolo_occupancy_vs_throughput` on each side of
    its cut, in width order."""
    below, above = _sides(split.attrs.get("cut", OCC_CUT))
    lo = split[split.occupancy == below].sort_values("width").reset_index(drop=True)
    hi = split[split.occupancy == above].sort_values("width").reset_index(drop=True)
    return lo, hi


# ---------------------------------------------------------------- activations and layout


def layout_compare(ncu, precision="fp16"):
    """Per layout at one precision (Nsight Compute per-kernel table with ``config``): summed
    forward kernel time, kernel count, layout-transform kernels, their time and shares, and the
    time ratio to NHWC."""

    df = with_config(ncu if "kernel_class" in ncu else add_kernel_class(ncu))
    df = df[df.precision == precision]
    tr = df.kernel_class == "layout_transform"
    out = (
        df.assign(_tr_t=df.duration_us.where(tr, 0.0), _tr_n=tr.astype(int))
        .groupby(["config", "layout"])
        .agg(
            kernels=("duration_us", "size"),
            forward_us=("duration_us", "sum"),
            transform_kernels=("_tr_n", "sum"),
            transform_us=("_tr_t", "sum"),
        )
        .reset_index()
    )
    out["transform_time_share"] = out.transform_us / out.forward_us
    out["transform_launch_share"] = out.transform_kernels / out.kernels
    base = out.set_index("layout").forward_us.get("nhwc")
    out["time_vs_nhwc"] = out.forward_us / base if base else float("nan")
    return out


# ---------------------------------------------------------------- facts

#: The prefix of every fact key of this module (keys are unique across topics).
PREFIX = "roofline."


def _roofline_facts(root: DataRoot, layers) -> list[dict]:
    peaks = roofline_ceilings(root)
    if peaks is None or not root.has(NCU_YOLO):
        return []
    roof = roofline_table(root.load(NCU_YOLO), layers, *peaks)
    ds = (NCU_YOLO, MODEL_LAYERS, CEILINGS)
    rows = []
    for r in side_summary(roof).itertuples():
        s = _w(r.width)
        rows += [
            fact("yolo_pct_of_roof_tw", r.pct_of_roof_tw, "%", scope=s, datasets=ds,
                 note="time-weighted share of each layer's roof, layers with FLOPs"),
            fact("yolo_compute_side_time_share", 1 - r.memory_side_time_share, "", scope=s,
                 datasets=ds, note="kernel time in layers above the ridge point"),
        ]  # fmt: skip
    zero = roof[roof.flops == 0]
    for w, g in zero.groupby("width"):
        rows.append(
            fact("zero_flop_max_pct_of_copy", g.pct_of_peak_gbps.max(), "%", scope=_w(w),
                 datasets=ds, note="Concat / Upsample layers: GB/s over the copy ceiling")
        )  # fmt: skip
    # two kinds of pure data movement side by side: nearest upsampling against concatenation
    moved = roof[roof.module_type.isin(["Upsample", "Concat"])]
    for w, g in moved.groupby("width"):
        gbps = g.groupby("module_type").achieved_gbps.median()
        if {"Upsample", "Concat"} <= set(gbps.index):
            rows.append(
                fact("upsample_over_concat_gbps", gbps["Upsample"] / gbps["Concat"], "x",
                     scope=_w(w), datasets=ds,
                     note=f"median GB/s of their minimal bytes: Upsample {gbps['Upsample']:.0f}, "
                     f"Concat {gbps['Concat']:.0f}")
            )  # fmt: skip
    return rows


def _resnet_facts(root: DataRoot, layers) -> list[dict]:
    if not root.has(NCU_RESNET) or layers is None:
        return []
    st = resnet_stages(add_kernel_class(root.load(NCU_RESNET)), layers)
    have = set(st.layer)
    if not (set(EARLY) | set(DEEP)) <= have:
        return []
    ds = (NCU_RESNET, MODEL_LAYERS)
    by = st.set_index("layer")
    # claim 14 reads the weaker of the two bounds
    # (yolo_sm.topics.claims.analyse.resnet_weaker_bound)
    rows = [
        fact("resnet_early_min_dram_pct", by.loc[list(EARLY)].dram_throughput_tw_pct.min(), "%",
             datasets=ds, note="the least DRAM-busy early stage"),
        fact("resnet_deep_min_sm_pct", by.loc[list(DEEP)].sm_throughput_tw_pct.min(), "%",
             datasets=ds, note="the least SM-busy deep stage"),
    ]  # fmt: skip
    return rows


def _wide_facts(root: DataRoot) -> list[dict]:
    if not root.has(NCU_WIDE):
        return []
    wide = with_config(add_kernel_class(root.load(NCU_WIDE)))
    st = throughput_view(wide, ["width", "stage"])
    first, last = st.stage.min(), st.stage.max()
    a, b = st[st.stage == first], st[st.stage == last]
    ds = (NCU_WIDE,)
    return [
        fact("wide_tensor_pipe_rise_pct", b.tensor_pipe_tw_pct.mean() - a.tensor_pipe_tw_pct.mean(),
             "%", datasets=ds, note="last minus first stage, means over widths"),
    ]  # fmt: skip


def _occupancy_facts(root: DataRoot) -> list[dict]:
    if not root.has(NCU_THROUGHPUT):
        return []
    ncu = root.load(NCU_THROUGHPUT)
    if ncu.empty:
        return []
    split = yolo_occupancy_vs_throughput(ncu, OCC_CUT)
    lo, hi = occupancy_sides(split)
    ds = (NCU_THROUGHPUT,)
    cut = f"{OCC_CUT:g}"
    rows = []
    for i, a in enumerate(lo.itertuples()):
        values = {f"tensor_pipe_pct_below_{cut}_occupancy": (a.tensor_pipe_tw_pct, "%")}
        scopes = [_w(a.width)] + ([""] if i == len(lo) - 1 else [])  # "": the widest config
        for s in scopes:
            rows += [fact(k, v, u, scope=s, datasets=ds) for k, (v, u) in values.items()]
    return rows


def _layout_facts(root: DataRoot) -> list[dict]:
    if not root.has(NCU_LAYOUT):
        return []
    lay = layout_compare(add_kernel_class(root.load(NCU_LAYOUT)), "fp16").set_index("layout")
    if not {"nchw", "nhwc"} <= set(lay.index):
        return []
    n = lay.loc["nchw"]
    ds, s = (NCU_LAYOUT,), "precision=fp16"
    return [
        fact("nchw_time_vs_nhwc", n.time_vs_nhwc, "x", scope=s, datasets=ds),
        fact("nchw_transform_time_share", n.transform_time_share, "", scope=s, datasets=ds),
    ]


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    roofline.c2f_fusion_removed_launch_share
    roofline.compile_minus_c2f_bound_launch_share roofline.eager_gpu_idle_share
    roofline.nchw_time_vs_nhwc roofline.nchw_transform_time_share
    roofline.tensor_pipe_pct_below_60_occupancy roofline.upsample_over_concat_gbps
    roofline.wide_tensor_pipe_rise_pct
    roofline.yolo_compute_side_time_share roofline.yolo_pct_of_roof_tw
    roofline.zero_flop_max_pct_of_copy
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The roofline notebook's numbers from ``root`` (facts table, :mod:`yolo_sm.analyse.facts`);
    facts whose datasets the root lacks are left out. Keys, each prefixed with :data:`PREFIX`
    (``roofline.yolo_pct_of_roof_tw``; scope ``width=1.0`` per width where noted; unscoped: the
    whole or, for the occupancy split, the widest config):

    How activations and weights grow with width is fixed by the model (a shape-only forward:
    :func:`activation_table`, :func:`width_exponent`), the same on every machine: a table.
    * absolute roofline (per width): ``yolo_pct_of_roof_tw``, ``yolo_compute_side_time_share``,
      ``zero_flop_max_pct_of_copy``, ``upsample_over_concat_gbps``
    * ResNet-101: ``resnet_early_min_dram_pct``, ``resnet_deep_min_sm_pct``
    * wide stack: ``wide_tensor_pipe_rise_pct``
    * occupancy split at 60 %: ``tensor_pipe_pct_below_60_occupancy``
    * layout (scope ``precision=fp16``): ``nchw_time_vs_nhwc``, ``nchw_transform_time_share``
    * launches: ``c2f_fusion_removed_launch_share`` (unscoped: the most over widths),
      ``c2f_fusion_removed_launch_share_min``, ``all_layers_fusion_removed_launch_share``,
      ``launches_per_forward``, ``eager_gpu_idle_share`` (scope ``width=W,batch=8``),
      ``compile_removed_launch_share``, ``compile_removed_time_share``,
      ``compile_minus_c2f_bound_launch_share``
    """
    layers = root.load(MODEL_LAYERS) if root.has(MODEL_LAYERS) else None
    rows = _occupancy_facts(root) + _layout_facts(root)
    rows += launch_facts(root) + _wide_facts(root)
    if layers is not None:
        rows += _roofline_facts(root, layers)
        rows += _resnet_facts(root, layers)
    return facts_table({**r, "key": PREFIX + r["key"]} for r in rows)

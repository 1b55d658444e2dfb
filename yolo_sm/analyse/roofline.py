"""Rooflines, memory and launch counts (notebook 06).

Which layers are bound by memory bandwidth and which by compute, what activations cost in memory,
what the NCHW layout costs in transform kernels, and how many kernels a forward launches.

Two kinds of roofline:

* **absolute** (YOLOv8): FLOPs and bytes per layer counted from the model (a shape-only forward on
  the meta device, :func:`layer_traffic`) against the layer's measured kernel time from Nsight
  Compute -> achieved TFLOP/s and GB/s, under ceilings given as parameters. The defaults
  (:func:`default_peaks`) are yolo_sm's own measurements (plan step ``ceilings``) when shipped,
  else the project brief's reference figures of this machine kind; :func:`ceiling_note` says
  which.
* **normalised** (ResNet-101, wide conv stack): Nsight Compute's ``sm_throughput_pct`` and
  ``dram_throughput_pct`` are each a percentage of the hardware's own peak, so no ceiling has to be
  assumed: a kernel near 100 % DRAM and low SM is bandwidth-bound, the reverse compute-bound.

Bytes are a lower bound on traffic: ``min_bytes`` counts the weights, the layer's inputs and its
output once (what a fully fused layer would have to move); ``conv_bytes`` counts every convolution
inside the layer reading its input and weights and writing its output (what unfused eager convs
move). Eager PyTorch moves more still: its bias, activation and residual kernels re-read and
re-write activations.
"""

from __future__ import annotations

from yolo_sm.analyse.fast import kernels_per_forward
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.collect.models.resnet import ResNetDetector
from yolo_sm.collect.models.view_tables import layer_traffic, resnet_model, yolo_traffic
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.hardware import peak_copy_gbps, peak_fp16_tflops
from yolo_sm.contract.labels import parse_config
from yolo_sm.contract.labels import with_config as _with_config

#: Device-to-device copy bandwidth measured on this machine kind (H200), as the project brief
#: reports it (../shared/h200/README.md); NOT measured by yolo_sm. The datasheet says 4.8 TB/s.
REFERENCE_PEAK_GBPS = 4300.0  # kept for readers; default_peaks() prefers measurements


#: A throughput at or above this percentage of its peak counts as "high" (Nsight Compute's
#: speed-of-light guidance treats ~60 % as good use of a unit).
HIGH_PCT = 60.0
BOUNDS = ("memory-bound", "compute-bound", "neither (latency / under-used)")
THROUGHPUT_COLS = (
    "achieved_occupancy_pct",
    "sm_throughput_pct",
    "dram_throughput_pct",
    "tensor_pipe_pct",
)
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


def default_peaks() -> tuple[float, float]:
    """(peak TFLOP/s, peak GB/s): yolo_sm's own measurement (``h200/ceilings``) when shipped,
    else the project brief's reference figures (``claims.peak_fp16_tflops`` /
    ``claims.peak_copy_gbps`` say which)."""

    return float(peak_fp16_tflops()[0]), float(peak_copy_gbps()[0])


def with_config(df, col: str = "config"):
    """A copy of ``df`` with family, width, precision, layout and batch parsed from ``col``."""
    return _with_config(df, col, strict=True)


# ---------------------------------------------------------------- counting (CPU, meta device)


# ---------------------------------------------------------------- absolute roofline (YOLOv8)


def layer_times(ncu, by=("config", "layer")):
    """Kernel count and summed kernel time (us) per config and layer of a per-kernel table."""
    g = ncu.groupby(list(by), observed=True).duration_us.agg(kernels="size", time_us="sum")
    return g.reset_index()


def roofline_table(
    ncu,
    widths=None,
    *,
    peak_tflops: float | None = None,
    peak_gbps: float | None = None,
    imgsz: int = 640,
    family: str = "yolov8",
    depth: float = 0.33,
):
    """One row per (config, layer) of a YOLO Nsight Compute table: FLOPs and bytes counted from
    the model at the config's width and batch, measured kernel time, achieved TFLOP/s and GB/s
    (of ``min_bytes``), the roof at the layer's intensity, the share of it achieved, and the side
    of the ridge point (``memory`` below it, ``compute`` above; zero-FLOP layers: ``memory``)."""
    import numpy as np
    import pandas as pd

    d_tflops, d_gbps = default_peaks()
    peak_tflops = d_tflops if peak_tflops is None else float(peak_tflops)
    peak_gbps = d_gbps if peak_gbps is None else float(peak_gbps)
    times = layer_times(ncu)
    rows = []
    for cfg, t in times.groupby("config"):
        c = parse_config(cfg)
        if c["family"] != family or (widths is not None and c["width"] not in widths):
            continue
        bpe = 4 if c["precision"] in ("fp32", "tf32") else 2
        lt = yolo_traffic(c["width"], imgsz, c["batch"], bpe, family, depth)
        rows.append(t.merge(lt, on="layer", how="inner").assign(**c))
    if not rows:
        raise ValueError("no config of the table matches the requested family / widths")
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
    df.attrs.update(peak_tflops=peak_tflops, peak_gbps=peak_gbps, ridge=ridge)
    return df.sort_values(["width", "index"]).reset_index(drop=True)


def side_summary(table):
    """Per width: layers and time below / above the ridge point, and the time-weighted share of
    the roof achieved on each side."""
    import pandas as pd

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
    import numpy as np

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


def resnet_stages(ncu, depth: int = 101, imgsz: int = 640, high: float = HIGH_PCT):
    """ResNet stages (stem, layer1-4, head) in forward order: :func:`throughput_view` per stage
    joined with FLOPs and bytes counted from the model at the table's batch, and achieved
    TFLOP/s. Kernels outside every stage range (layer '') are left out."""

    cfg = parse_config(ncu.config.iloc[0])
    k = ncu[ncu.layer.isin(ResNetDetector.STAGES)]
    view = throughput_view(k, "layer", high)
    lt = layer_traffic(resnet_model(depth), imgsz, cfg["batch"])
    cols = ["index", "layer", "flops_batch", "min_bytes", "intensity", "params"]
    out = lt[cols].merge(view, on="layer", how="inner").sort_values("index")
    out["achieved_tflops"] = out.flops_batch / (out.time_us * 1e-6) / 1e12
    return out.reset_index(drop=True)


def resnet_claim(stages, early=("stem", "layer1"), deep=("layer3", "layer4"), high=HIGH_PCT):
    """Verdict on "early ResNet layers are bandwidth-bound, deep layers compute-bound" from
    :func:`resnet_stages`: ``holds`` when every early stage is memory-bound and every deep stage
    compute-bound; ``partly holds`` when only the direction is right (DRAM % falls and tensor-pipe
    % rises from the early to the deep stages, time-weighted) or one half holds; else
    ``does not hold``. Returns a dict with the figures behind it."""
    s = stages.set_index("layer")

    def tw(names, col):
        g = s.loc[list(names)]
        return float((g[col] * g.time_us).sum() / g.time_us.sum())

    e_dram, d_dram = tw(early, "dram_throughput_tw_pct"), tw(deep, "dram_throughput_tw_pct")
    e_sm, d_sm = tw(early, "sm_throughput_tw_pct"), tw(deep, "sm_throughput_tw_pct")
    e_tp, d_tp = tw(early, "tensor_pipe_tw_pct"), tw(deep, "tensor_pipe_tw_pct")
    early_mem = all(s.loc[n, "bound"] == BOUNDS[0] for n in early)
    deep_comp = all(s.loc[n, "bound"] == BOUNDS[1] for n in deep)
    direction = e_dram > d_dram and d_tp > e_tp
    if early_mem and deep_comp:
        verdict = "holds"
    elif early_mem or deep_comp or direction:
        verdict = "partly holds"
    else:
        verdict = "does not hold"
    return {
        "verdict": verdict,
        "early_memory_bound": early_mem,
        "deep_compute_bound": deep_comp,
        "direction_right": direction,
        "early_dram_pct": e_dram,
        "deep_dram_pct": d_dram,
        "early_sm_pct": e_sm,
        "deep_sm_pct": d_sm,
        "early_tensor_pct": e_tp,
        "deep_tensor_pct": d_tp,
        "max_stage_dram_pct": float(s.dram_throughput_tw_pct.max()),
        "max_stage_sm_pct": float(s.sm_throughput_tw_pct.max()),
        "high_pct": high,
    }


# ---------------------------------------------------------------- YOLOv8: occupancy vs throughput

#: Theoretical occupancy (%) under which claim 6 calls an inference service wasteful.
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
    import numpy as np

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
    import pandas as pd

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
    import pandas as pd

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


def low_occupancy_is_busiest(split) -> bool:
    """Whether, at the widest config of :func:`yolo_occupancy_vs_throughput`, the kernels under
    the cut keep the tensor pipes busier than the rest and the SMs at least as busy."""
    lo, hi = occupancy_sides(split)
    a, b = lo.iloc[-1], hi.iloc[-1]
    return bool(
        a.tensor_pipe_tw_pct > b.tensor_pipe_tw_pct
        and a.sm_throughput_tw_pct >= b.sm_throughput_tw_pct
    )


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


# ---------------------------------------------------------------- launch counts


def launches_per_type(trace, iteration: int = 0):
    """Kernels per forward per config and module type (Kineto trace, one iteration), with each
    type's share of the forward's launches and of its kernel time."""
    t = trace[trace.iteration == iteration]
    g = t.groupby(["config", "module_type"]).duration_us.agg(kernels="size", time_us="sum")
    g = g.reset_index()
    tot = g.groupby("config")[["kernels", "time_us"]].transform("sum")
    g["launch_share"] = g.kernels / tot.kernels
    g["time_share"] = g.time_us / tot.time_us
    g["width"] = g.config.map(lambda c: parse_config(c)["width"])
    return g.sort_values(["width", "kernels"], ascending=[True, False]).reset_index(drop=True)


def fusion_bound(trace, iteration: int = 0, fused_type: str = "C2f"):
    """Per config: launches per forward, those inside ``fused_type`` layers, how many such layers,
    and the share of all launches removed if each such layer became one kernel
    (``removed_share``), against fusing every layer into one kernel (``all_layers_removed_share``).
    An upper bound; :func:`fusion_measured` is what a real fusing engine did."""
    import pandas as pd

    t = trace[trace.iteration == iteration]
    rows = []
    for cfg, g in t.groupby("config"):
        f = g[g.module_type == fused_type]
        total, nf, layers = len(g), len(f), f.layer.nunique()
        all_layers = g.layer[g.layer != ""].nunique() + int((g.layer == "").any())
        rows.append(
            {
                "config": cfg,
                "width": parse_config(cfg)["width"],
                "launches": total,
                f"{fused_type}_layers": layers,
                f"{fused_type}_launches": nf,
                f"{fused_type}_launch_share": nf / total,
                f"{fused_type}_time_share": f.duration_us.sum() / g.duration_us.sum(),
                "removed_share": (nf - layers) / total,
                "layers": all_layers,
                "all_layers_removed_share": (total - all_layers) / total,
            }
        )
    return pd.DataFrame(rows).sort_values("width").reset_index(drop=True)


def fusion_measured(kernels, eager: str = "eager", fused: str = "compile"):
    """What a measured fusion did, next to :func:`fusion_bound`'s bound: kernel launches and
    summed GPU kernel time per forward of an eager and a fusing engine (e.g. torch.compile) of
    the same model config, from one Kineto table whose ``config`` names the engine (as
    :func:`yolo_sm.analyse.fast.compare_backends` builds it), and the share of the eager launches
    and kernel time that the fusing engine removed."""
    import pandas as pd

    missing = [c for c in (eager, fused) if c not in set(kernels.config)]
    if missing:
        raise UserError(f"no kernels of {', '.join(missing)} in the table")
    g = kernels.groupby("config")
    n_iter = g.iteration.nunique()
    per = pd.DataFrame(
        {
            "launches": kernels_per_forward(kernels),
            "kernel_ms": g.duration_us.sum() / n_iter / 1e3,
            "forwards": n_iter,
        }
    )
    e = per.loc[eager]
    out = per.loc[[eager, fused]].rename_axis("engine").reset_index()
    out["removed_launch_share"] = 1 - out.launches / e.launches
    out["removed_time_share"] = 1 - out.kernel_ms / e.kernel_ms
    return out


def launch_cost(sweep, trace, batch: int = 1, precision="fp16", layout="nhwc", iteration=0):
    """Per width: eager and CUDA-graph latency at ``batch`` from a sweep (same run), the time the
    graph saves, the kernels per forward (from the trace, its own batch) and the saving per
    launch in us. A CUDA graph keeps every kernel but issues them in one call, so the saving is
    the host's launch cost (an estimate: the trace's batch may differ from ``batch``)."""
    s = sweep[
        (sweep.status == "ok")
        & (sweep.batch == batch)
        & (sweep.precision == precision)
        & (sweep.layout == layout)
    ]
    p = s.pivot_table(index="width", columns="backend", values="median_ms")
    k = trace[trace.iteration == iteration].groupby("config").size()
    k.index = [parse_config(c)["width"] for c in k.index]
    out = p[["eager", "cudagraph"]].reset_index()
    out["graph_saves_ms"] = out.eager - out.cudagraph
    out["kernels_per_forward"] = out.width.map(k)
    out["saved_us_per_launch"] = 1e3 * out.graph_saves_ms / out.kernels_per_forward
    t = trace[trace.iteration == iteration]
    if {parse_config(c)["batch"] for c in t.config.unique()} == {batch}:  # same batch only
        gpu = t.groupby("config").duration_us.sum() / 1e3
        gpu.index = [parse_config(c)["width"] for c in gpu.index]
        out["gpu_kernel_ms"] = out.width.map(gpu)
        out["gpu_idle_share_eager"] = 1 - out.gpu_kernel_ms / out.eager
    out = out.dropna(subset=["kernels_per_forward"]).reset_index(drop=True)
    out.attrs["batch"] = batch
    return out


# ---------------------------------------------------------------- findings text

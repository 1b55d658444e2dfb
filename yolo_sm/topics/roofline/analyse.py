"""Rooflines (notebook 06), the layout cost (07) and the facts of notebooks 06 to 08. Absolute
roofline: FLOPs and bytes per layer (``model_layers``) against Nsight Compute kernel time under the
root's own ceilings; ``min_bytes`` counts weights, inputs and output once (a fused layer),
``conv_bytes`` every convolution's traffic. Normalised roofline: SM and DRAM throughput, % of the
GPU's own peak."""

from __future__ import annotations

import numpy as np
import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import add_kernel_class, with_kernel_class
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.hardware import CEILINGS, peak_copy_gbps, peak_fp16_tflops
from yolo_sm.contract.hardware import roofline_ceilings as _ceilings
from yolo_sm.contract.labels import parse_config
from yolo_sm.contract.labels import with_config as _with_config
from yolo_sm.topics.launches.analyse import launch_facts

MODEL_LAYERS = "model_layers"
NCU_YOLO = "ncu_width_b8"
NCU_RESNET = "ncu_resnet101"
NCU_WIDE = "ncu_wide_stack"
NCU_THROUGHPUT = "ncu_throughput_w1"
NCU_LAYOUT = "ncu_precision_w1"
#: the prefix of every fact key of this module
PREFIX = "roofline."
#: a throughput (% of peak) at or above this is "high" in the ``bound`` columns and the bands
HIGH_PCT = 60.0
BOUNDS = ("memory-bound", "compute-bound", "neither (latency / under-used)")
#: ResNet stages the facts call early and deep
EARLY, DEEP = ("stem", "layer1"), ("layer3", "layer4")
RESNET_STAGES = ("stem", "layer1", "layer2", "layer3", "layer4", "head")
#: theoretical occupancy (%) at which YOLO's kernels are split (the article claim's 60 %)
OCC_CUT = 60.0
#: the columns of :func:`roofline_table` worth reading first
ROOF_COLUMNS = ("width", "layer", "module_type", "kernels", "time_us", "flops_batch", "min_bytes",
                "conv_bytes", "intensity", "conv_intensity", "achieved_tflops", "achieved_gbps",
                "pct_of_roof", "side")  # fmt: skip


def with_config(df, col: str = "config"):
    """A copy of ``df`` with family, width, precision, layout and batch parsed from ``col``."""
    return _with_config(df, col, strict=True)


def model_rows(layers, model: str = "yolov8", width: float | None = None, max_channels=None):
    """One model's rows of ``model_layers`` in forward order (``max_channels``: default 2048 where
    several)."""
    d = layers[layers.model == model]
    if width is not None:
        d = d[np.isclose(d.width, float(width))]
    if "max_channels" in d and d.max_channels.notna().any():
        caps = d.max_channels.dropna().unique()
        cap = max_channels if max_channels is not None else (2048 if 2048 in caps else max(caps))
        d = d[d.max_channels == cap]
    if d.empty:
        at = f" at width {width:g}" if width is not None else ""
        raise UserError(f"model_layers has no rows of {model}{at}")
    return d.sort_values(["width", "index"]).reset_index(drop=True)


def traffic(layers, model="yolov8", width=1.0, batch=1, bytes_per_element=2, max_channels=None):
    """:func:`model_rows` scaled to ``batch`` images at ``bytes_per_element``, with bytes and
    intensities (FLOP/B)."""
    d = model_rows(layers, model, width, max_channels).copy()
    scale, per_image = bytes_per_element / d.bytes_per_element, batch / d.batch
    d["weight_bytes"] = (d.weight_bytes * scale).astype("int64")
    for c in ("in_bytes", "out_bytes"):
        d[c] = (d[c] * scale * per_image).astype("int64")
    d["min_bytes"] = d.weight_bytes + d.in_bytes + d.out_bytes
    d["conv_bytes"] = (d.conv_io_bytes * scale * per_image).astype("int64") + (
        d.conv_weight_bytes * scale
    ).astype("int64")
    d["flops_batch"] = d.flops * batch
    d["batch"], d["bytes_per_element"] = batch, bytes_per_element
    d["intensity"] = d.flops_batch / d.min_bytes
    d["conv_intensity"] = (d.flops_batch / d.conv_bytes).where(d.conv_bytes > 0)
    return d


def activation_table(layers, widths=None, model: str = "yolov8"):
    """Per width and layer: output activation MB per image and weight MB (fp16), with a
    ``label``."""
    d = model_rows(layers, model)
    if widths is not None:
        d = d[d.width.isin([float(w) for w in widths])]
    return d.assign(activation_mb=d.out_bytes / 1e6, weight_mb=d.weight_bytes / 1e6,
                    label=d.layer + " " + d.module_type).reset_index(drop=True)  # fmt: skip


def roofline_table(ncu, layers, peak_tflops, peak_gbps, widths=None, family="yolov8", source=""):
    """Per (config, layer): :func:`traffic`, kernel time, achieved TFLOP/s and GB/s, % of the roof,
    ``side`` of the ridge; ``attrs`` hold the ceilings."""
    peak_tflops, peak_gbps = float(peak_tflops), float(peak_gbps)
    times = ncu.groupby(["config", "layer"]).duration_us.agg(kernels="size", time_us="sum")
    rows = []
    for cfg, t in times.reset_index().groupby("config"):
        c = parse_config(cfg)
        if c["family"] != family or (widths is not None and c["width"] not in widths):
            continue
        bytes_per_element = 4 if c["precision"] in ("fp32", "tf32") else 2
        lt = traffic(layers, family, c["width"], c["batch"], bytes_per_element)
        lt = lt.drop(columns=[k for k in c if k in lt])
        rows.append(t.merge(lt, on="layer").assign(**c))
    if not rows:
        raise UserError("no config of the table matches the requested family / widths")
    df = pd.concat(rows, ignore_index=True)
    sec = df.time_us * 1e-6
    df["achieved_tflops"] = df.flops_batch / sec / 1e12
    df["achieved_gbps"] = df.min_bytes / sec / 1e9
    df["roof_tflops"] = np.minimum(peak_tflops, df.intensity * peak_gbps / 1e3)
    df["pct_of_roof"] = (100 * df.achieved_tflops / df.roof_tflops).where(df.flops > 0)
    df["pct_of_peak_gbps"] = 100 * df.achieved_gbps / peak_gbps
    ridge = peak_tflops * 1e3 / peak_gbps
    df["side"] = np.where(df.intensity >= ridge, "compute", "memory")
    out = df.sort_values(["width", "index"]).reset_index(drop=True)
    out.attrs.update(
        peak_tflops=peak_tflops, peak_gbps=peak_gbps, ridge=ridge, ceilings_from=source
    )
    return out


def root_roofline(root: DataRoot, widths=None):
    """:func:`roofline_table` of ``root`` under its own ceilings; UserError naming what the root
    lacks."""
    need = [n for n in (NCU_YOLO, MODEL_LAYERS, CEILINGS) if not root.has(n)]
    peaks = _ceilings(root)
    if need or peaks is None:
        raise UserError(f"{root.name} lacks {', '.join(need) or 'the fp16 matmul or copy ceiling'}")
    src = f"{peak_fp16_tflops(root)[1]} and {peak_copy_gbps(root)[1]}"
    src += f", measured on {root.device_name()}"
    return roofline_table(
        root.load(NCU_YOLO), root.load(MODEL_LAYERS), *peaks, widths=widths, source=src
    )


def side_summary(table):
    """Per width: layers, time, the memory side's layers and time share, TFLOP/s, time-weighted % of
    roof."""

    def agg(g):
        f, t = g[g.flops > 0], g.time_us
        return pd.Series({
            "layers": len(g), "time_us": t.sum(),
            "memory_side_layers": int((g.side == "memory").sum()),
            "memory_side_time_share": t[g.side == "memory"].sum() / t.sum(),
            "tflops_forward": g.flops_batch.sum() / t.sum() / 1e6,
            "pct_of_roof_tw": (f.pct_of_roof * f.time_us).sum() / f.time_us.sum(),
        })  # fmt: skip

    return table.groupby("width")[list(table.columns)].apply(agg).reset_index()


def bound_of(sm_pct, dram_pct, high: float = HIGH_PCT):
    """``memory-bound`` (DRAM >= ``high`` % and >= SM), ``compute-bound`` (SM >= ``high`` % and >
    DRAM), else neither."""
    sm, dram = np.asarray(sm_pct, dtype=float), np.asarray(dram_pct, dtype=float)
    out = np.select(
        [(dram >= high) & (dram >= sm), (sm >= high) & (sm > dram)], BOUNDS[:2], BOUNDS[2]
    )
    return out if out.ndim else str(out)


def throughput_view(ncu, by, high: float = HIGH_PCT):
    """Per group of ``by``: kernels, time, time-weighted occupancy and throughputs (%), ``bound``,
    ``time_share``."""
    cols = ["achieved_occupancy_pct", "theoretical_occupancy_pct", "sm_throughput_pct",
            "dram_throughput_pct", "tensor_pipe_pct"]  # fmt: skip
    out = time_weighted(ncu, by, [c for c in cols if c in ncu])
    out["bound"] = bound_of(out.sm_throughput_tw_pct, out.dram_throughput_tw_pct, high)
    out["time_share"] = out.time_us / out.time_us.sum()
    return out


def resnet_stages(ncu, layers, model: str = "resnet101", high: float = HIGH_PCT):
    """ResNet stages in forward order: :func:`throughput_view` with FLOPs, bytes and achieved
    TFLOP/s."""
    view = throughput_view(ncu[ncu.layer.isin(RESNET_STAGES)], "layer", high)
    lt = traffic(layers, model, 1.0, parse_config(ncu.config.iloc[0])["batch"])
    cols = ["index", "layer", "flops_batch", "min_bytes", "intensity", "params"]
    out = lt[cols].merge(view, on="layer").sort_values("index").reset_index(drop=True)
    out["achieved_tflops"] = out.flops_batch / (out.time_us * 1e-6) / 1e12
    return out


def yolo_kernels(ncu, cut: float = OCC_CUT):
    """A YOLO ncu table with config, ``kernel_class``, ``blocks_per_sm`` and ``occupancy`` (side of
    ``cut`` %)."""
    if ncu is None or len(ncu) == 0:
        raise UserError("no kernels: the Nsight Compute table is absent or empty")
    df = with_config(with_kernel_class(ncu))
    limits = [c for c in df.columns if c.startswith("limit_")]
    if limits:
        df["blocks_per_sm"] = df[limits].min(axis=1)
    df["occupancy"] = np.where(df.theoretical_occupancy_pct < cut, f"< {cut:g} %", f">= {cut:g} %")
    return df


def yolo_occupancy_vs_throughput(kernels, high: float = HIGH_PCT):
    """Per width and side of the occupancy cut: :func:`throughput_view`, time share of the width's
    time."""
    out = throughput_view(kernels, ["width", "occupancy"], high)
    out["time_share"] = out.time_us / out.groupby("width").time_us.transform("sum")
    return out.sort_values(["width", "occupancy"], ascending=[True, False]).reset_index(drop=True)


def layout_compare(ncu, precision="fp16"):
    """Per layout at ``precision``: kernel time and count, layout transforms' time and launch
    shares, time vs NHWC."""
    df = with_config(with_kernel_class(ncu))
    df = df[df.precision == precision]
    tr = df.kernel_class == "layout_transform"
    out = df.assign(tr=tr, tr_us=df.duration_us.where(tr, 0.0)).groupby(["config", "layout"]).agg(
        kernels=("duration_us", "size"), forward_us=("duration_us", "sum"),
        transform_kernels=("tr", "sum"), transform_us=("tr_us", "sum"),
    ).reset_index()  # fmt: skip
    out["transform_time_share"] = out.transform_us / out.forward_us
    out["transform_launch_share"] = out.transform_kernels / out.kernels
    base = out.set_index("layout").forward_us.get("nhwc")
    out["time_vs_nhwc"] = out.forward_us / base if base else np.nan
    return out


def _w1(df):
    return df[np.isclose(df.width, 1.0)]


def _roofline_facts(root: DataRoot) -> list[dict]:
    if _ceilings(root) is None or not root.has(NCU_YOLO) or not root.has(MODEL_LAYERS):
        return []
    roof = _w1(root_roofline(root))
    if roof.empty:
        return []
    ds, s, f = (NCU_YOLO, MODEL_LAYERS, CEILINGS), "width=1.0", roof[roof.flops > 0]
    gbps = roof.groupby("module_type").achieved_gbps.median()
    rows = [
        fact("yolo_pct_of_roof_tw", (f.pct_of_roof * f.time_us).sum() / f.time_us.sum(), "%",
             scope=s, datasets=ds),
        fact("yolo_compute_side_time_share",
             roof.time_us[roof.side == "compute"].sum() / roof.time_us.sum(), scope=s, datasets=ds),
        fact("zero_flop_max_pct_of_copy", roof.pct_of_peak_gbps[roof.flops == 0].max(), "%",
             scope=s, datasets=ds),
    ]  # fmt: skip
    if {"Upsample", "Concat"} <= set(gbps.index):
        ratio = gbps["Upsample"] / gbps["Concat"]
        rows.append(fact("upsample_over_concat_gbps", ratio, "x", scope=s, datasets=ds))
    return rows


def _kernel_facts(root: DataRoot) -> list[dict]:
    rows = []
    if root.has(NCU_RESNET) and root.has(MODEL_LAYERS):  # claim 14 reads these two
        st = resnet_stages(add_kernel_class(root.load(NCU_RESNET)), root.load(MODEL_LAYERS))
        by, ds = st.set_index("layer"), (NCU_RESNET, MODEL_LAYERS)
        if set(EARLY + DEEP) <= set(by.index):
            rows += [
                fact("resnet_early_min_dram_pct", by.loc[list(EARLY)].dram_throughput_tw_pct.min(),
                     "%", datasets=ds),
                fact("resnet_deep_min_sm_pct", by.loc[list(DEEP)].sm_throughput_tw_pct.min(), "%",
                     datasets=ds),
            ]  # fmt: skip
    if root.has(NCU_WIDE):  # stages in the order their first kernel ran
        wide = with_config(root.load(NCU_WIDE)).sort_values("kernel_id")
        st = throughput_view(wide, ["width", "stage"]).set_index("stage").tensor_pipe_tw_pct
        first, last = wide.stage.iloc[0], wide.stage.iloc[-1]
        rise = st[last].mean() - st[first].mean()
        rows.append(fact("wide_tensor_pipe_rise_pct", rise, "%", datasets=(NCU_WIDE,)))
    if root.has(NCU_THROUGHPUT) and len(k := root.load(NCU_THROUGHPUT)):  # claim 6
        split = _w1(yolo_occupancy_vs_throughput(yolo_kernels(k)))
        below = split[split.occupancy.str.startswith("<")]
        if len(below):
            key = f"tensor_pipe_pct_below_{OCC_CUT:g}_occupancy"
            rows.append(fact(key, below.tensor_pipe_tw_pct.iloc[0], "%", scope="width=1.0",
                             datasets=(NCU_THROUGHPUT,)))  # fmt: skip
    if root.has(NCU_LAYOUT):  # claim 16 and notebook 07
        lay = layout_compare(root.load(NCU_LAYOUT)).set_index("layout")
        if {"nchw", "nhwc"} <= set(lay.index):
            n, ds, s = lay.loc["nchw"], (NCU_LAYOUT,), "precision=fp16"
            rows += [
                fact("nchw_time_vs_nhwc", n.time_vs_nhwc, "x", scope=s, datasets=ds),
                fact("nchw_transform_time_share", n.transform_time_share, scope=s, datasets=ds),
            ]
    return rows


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(PREFIX + k for k in """
    c2f_fusion_removed_launch_share compile_minus_c2f_bound_launch_share eager_gpu_idle_share
    nchw_time_vs_nhwc nchw_transform_time_share tensor_pipe_pct_below_60_occupancy
    upsample_over_concat_gbps wide_tensor_pipe_rise_pct yolo_compute_side_time_share
    yolo_pct_of_roof_tw zero_flop_max_pct_of_copy resnet_early_min_dram_pct resnet_deep_min_sm_pct
    """.split())  # fmt: skip


def facts(root: DataRoot) -> pd.DataFrame:
    """The facts of notebooks 06 to 08 (keys prefixed :data:`PREFIX`) that ``root`` gives."""
    rows = _roofline_facts(root) + _kernel_facts(root) + launch_facts(root)
    return facts_table({**r, "key": PREFIX + r["key"]} for r in rows)

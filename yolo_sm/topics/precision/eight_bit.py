"""FP16, INT8 and FP8 side by side (notebook 02): tables and facts of ``bench_8bit``,
``numerics_8bit`` and the 8-bit Kineto traces."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.bench_table import ok_rows
from yolo_sm.analyse.facts import fact, sm_clock_mhz
from yolo_sm.analyse.weighting import time_weighted, weighted_mean
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import config_label, parse_config
from yolo_sm.contract.vocab import TOLERANCE, Precision
from yolo_sm.topics.deploy.analyse import (
    CONV_PARTS,
    EPILOGUE,
    QUANTISE_PARTS,
    kernel_parts,
    part_ms,
    part_order,
    time_breakdown,
)
from yolo_sm.topics.precision import int8_kernels

BENCH_8BIT = "bench_8bit"
TRACE_INT8 = "trace_int8_b64"
#: the Kineto kernels of the eager fp16 and fp8 engines (width 1.0, batch 64)
TRACE_FP8 = "trace_fp8_w1_b64"
#: the traces that hold an 8-bit engine's kernels beside fp16's, by 8-bit precision
TRACES_8BIT = {"int8": TRACE_INT8, "fp8": TRACE_FP8}
#: the fp16 engine of the same backend as the 8-bit engines: eager's kernels in one graph
GRAPH_FP16 = "cudagraph/fp16/nhwc"
NUMERICS_8BIT = "numerics_8bit"
NUMERICS = "numerics"
#: the 8-bit precisions compared with fp16
EIGHT_BIT = ("int8", "fp8")
#: the error a failed numerical check states in its message
_CHECK_ERROR = r"relative L2 error ([0-9.]+(?:e[-+]?\d+)?)"


def tolerance(precision: str) -> float:
    """The tolerance of ``precision``'s numerical check (``contract.vocab.TOLERANCE``)."""
    return TOLERANCE[Precision(precision)]


def check_errors(df) -> pd.Series:
    """Each row's numerical-check error: ``rel_err``, else the one a rejection message states."""
    parsed = df.message.fillna("").str.extract(_CHECK_ERROR, expand=False).astype(float)
    return df.rel_err.where(df.status == "ok", parsed) if "rel_err" in df else parsed


def _labels(df) -> pd.Series:
    """Per row ``fp16``, ``fp8``, ``int8 (max)`` or ``int8 (percentile 99.99)``."""
    cal = df.get("calibration", pd.Series("", index=df.index)).fillna("").astype(str)
    pct = df.get("int8_percentile", pd.Series(math.nan, index=df.index)).astype(float)
    cal = cal.where((cal != "percentile") | pct.isna(), "percentile " + pct.map("{:g}".format))
    i8 = (df.precision == "int8") & (cal != "")
    return df.precision.astype(str).where(~i8, "int8 (" + cal + ")")


def engine_speed(bench):
    """The bench's model-only rows with img/s over the fastest fp16 engine and over the fp16
    CUDA graph of the same width and batch, SM clock (MHz) and check error."""
    d = bench[bench.scope == "model_only"] if "scope" in bench else bench
    if d.empty:
        return pd.DataFrame()
    d = d.assign(rel_err=check_errors(d), sm_clock_mhz=sm_clock_mhz(d))
    ok = ok_rows(d)
    fp16 = ok[ok.precision == "fp16"]
    unit = ["width", "batch"]
    best = fp16.loc[fp16.groupby(unit).img_per_s.idxmax()] if len(fp16) else fp16
    best = best.set_index(unit)
    graph = fp16[fp16.variant == GRAPH_FP16].set_index(unit)
    key = pd.MultiIndex.from_frame(d[unit])
    d["fastest_fp16"] = best.variant.reindex(key).to_numpy()
    d["vs_fastest_fp16"] = d.img_per_s.to_numpy() / best.img_per_s.reindex(key).to_numpy()
    d["vs_cudagraph_fp16"] = d.img_per_s.to_numpy() / graph.img_per_s.reindex(key).to_numpy()
    quant = ["quant_convs", "quant_fallbacks", "quant_handoffs"]
    for c in quant:
        if c not in d:
            d[c] = math.nan
    cols = ["width", "batch", "variant", "backend", "precision", "status", "img_per_s"]
    cols += ["vs_fastest_fp16", "fastest_fp16", "vs_cudagraph_fp16", "sm_clock_mhz", "rel_err"]
    cols += quant
    cols += ["message"] + [c for c in ("prov_device",) if c in d]
    return (
        d[cols]
        .sort_values(["batch", "width", "img_per_s"], ascending=[False, True, False])
        .reset_index(drop=True)
    )


def speed_grid(speed):
    """:func:`engine_speed`'s ``vs_fastest_fp16`` per (batch, width) and variant."""
    return speed.pivot_table(
        index=["batch", "width"], columns="variant", values="vs_fastest_fp16"
    ).round(2)


def photo_rows(numerics, *, class_prior: bool = True):
    """The rel_err rows on photos (with the bench's class prior by default), labelled."""
    d = numerics[(numerics["input"] == "photo") & (numerics.metric == "rel_err")]
    if "class_prior" in d:
        d = d[d.class_prior.astype(bool) == class_prior]
    return d.assign(engine=_labels(d))


def error_table(numerics_8bit, numerics=None):
    """Per width and engine: head-output error on the photos, its ratio to tolerance, and the
    boxes after NMS matched to fp16's (share at IoU >= 0.9 each way)."""
    frames = [numerics_8bit]
    if numerics is not None:
        frames.append(numerics[numerics.precision == "fp8"])
    d = pd.concat(frames, ignore_index=True)
    e = photo_rows(d)
    err = e.groupby(["width", "engine", "precision"]).rel_err.max().reset_index()
    err["over_tolerance"] = err.rel_err / err.precision.map(tolerance).astype(float)
    b = d[d.metric == "boxes"].assign(engine=lambda x: _labels(x))
    if len(b):
        cols = ["boxes", "reference_boxes", "matched", "reference_matched"]
        box = b.groupby(["width", "engine"])[cols].mean().reset_index()
        err = err.merge(box, on=["width", "engine"], how="outer")
    return err.sort_values(["width", "engine"]).reset_index(drop=True)


def speed_facts(speed) -> list[dict]:
    """Per 8-bit precision: most fp16-fallback convolutions in one GPU engine, engines failed."""
    out, ds = [], (BENCH_8BIT,)
    for p in EIGHT_BIT:
        s = speed[speed.precision == p]
        if s.empty:
            continue
        gpu = s.prov_device.astype(str).str.startswith("cuda") if "prov_device" in s else None
        falls = s.quant_fallbacks[gpu] if gpu is not None else s.quant_fallbacks
        v = falls.max() if len(falls) else math.nan
        out += [
            fact("engine_fallbacks_max", v, "convs", scope=f"precision={p}", datasets=ds),
            fact("bench_engines_failed", int((s.status != "ok").sum()), "engines",
                 scope=f"precision={p}", datasets=ds),
        ]  # fmt: skip
    return out


def error_facts(errors) -> list[dict]:
    """int8's largest error over tolerance, percentile over max calibration's error (median
    over widths) and smallest box match (%), from :func:`error_table`."""
    ds, i8 = (NUMERICS_8BIT,), errors[errors.precision == "int8"]
    if i8.empty:
        return []
    out = [fact("int8_error_over_tolerance_max", i8.over_tolerance.max(), "x", datasets=ds)]
    w = i8.pivot_table(index="width", columns="engine", values="rel_err")
    pct = [c for c in w if c.startswith("int8 (percentile")]
    if "int8 (max)" in w and pct:
        v = (w[pct[0]] / w["int8 (max)"]).median()
        out.append(fact("int8_percentile_over_max_error", v, "x", datasets=ds))
    if "matched" in i8:
        m = i8[["matched", "reference_matched"]].min(axis=1).min()
        out.append(fact("int8_box_match_min", 100 * m, "%", datasets=ds))
    return out


def int8_breakdown(kernels):
    """GPU ms per forward by part of each config of an int8 trace, columns by width."""
    b = time_breakdown(kernels)

    def order(label):
        c = parse_config(label, strict=False)
        return (c["width"], c["precision"] == "int8")

    return b[sorted(b.columns, key=order)]


def trace_pairs(configs, precision: str = "int8") -> list[tuple[float, str, str]]:
    """(width, fp16 config, ``precision`` config) per width traced in both."""
    configs = set(configs)
    out = []
    for c8 in configs:
        c = parse_config(c8, strict=False)
        if c["precision"] != precision:
            continue
        c16 = config_label(c["family"], c["width"], "fp16", c["layout"], c["batch"])
        if c16 in configs:
            out.append((c["width"], c16, c8))
    return sorted(out)


def trace_table(breakdown):
    """Per width of :func:`int8_breakdown`: GPU ms per forward, int8 conv time over fp16's,
    quantisation cost over what int8 saves, and the share left in fp16 (%)."""
    b = breakdown
    rows = []
    for w, c16, c8 in trace_pairs(b.columns):
        batch = parse_config(c8, strict=False)["batch"]
        conv16, conv8 = part_ms(b, c16, CONV_PARTS), part_ms(b, c8, CONV_PARTS)
        epi16, epi8 = part_ms(b, c16, EPILOGUE), part_ms(b, c8, EPILOGUE)
        quant = part_ms(b, c8, QUANTISE_PARTS)
        saving = (conv16 + epi16) - (conv8 + epi8)
        unchanged = part_ms(b, c8, UNCHANGED)
        t16, t8 = float(b.loc["total", c16]), float(b.loc["total", c8])
        rows.append(dict(
            width=w, batch=batch, fp16_ms=t16, int8_ms=t8, int8_over_fp16=t8 / t16,
            fp16_conv_ms=conv16, int8_conv_ms=conv8,
            conv_ratio=conv8 / conv16 if conv16 else math.nan, epilogue_saved_ms=epi16 - epi8,
            quantise_ms=quant, quantise_over_saving=quant / saving if saving > 0 else math.inf,
            unchanged_pct=100 * unchanged / t8,
        ))  # fmt: skip
    return pd.DataFrame(rows)


#: the parts of a forward the 8-bit engines leave in fp16 as they are
UNCHANGED = ("copy / concat", "pooling / upsample", "pooling (Triton)", "upsample (Triton)")


def trace_facts(table) -> list[dict]:
    """Worst over the widths of :func:`trace_table`'s three columns."""
    if table.empty:
        return []
    ds = (TRACE_INT8,)
    return [
        fact("int8_conv_over_fp16_conv_max", table.conv_ratio.max(), "x", datasets=ds),
        fact("int8_quantise_over_saving_max", table.quantise_over_saving.max(), "x", datasets=ds),
        fact("int8_unchanged_pct_min", table.unchanged_pct.min(), "%", datasets=ds),
    ]


def part_occupancy(kernels):
    """Per config and part of a Kineto table: kernels and ms per forward, share (%), and
    time-weighted occupancy (%), registers per thread and shared memory per block (KiB)."""
    k = kernels.assign(
        part=kernel_parts(kernels), shared_mem_kib=kernels.shared_mem_per_block_bytes / 1024
    )
    cols = ("theoretical_occupancy_pct", "est_occupancy_pct", "registers_per_thread")
    t = time_weighted(k, ["config", "part"], cols=(*cols, "shared_mem_kib"))
    forwards = t.config.map(k.groupby("config").iteration.nunique())
    t["kernels"] = t.kernels / forwards
    t["ms"] = t.time_us / forwards / 1e3
    t["share_pct"] = 100 * t.time_us / t.groupby("config").time_us.transform("sum")
    order = {p: i for i, p in enumerate(part_order(t.part))}
    t = t.assign(_o=t.part.map(order)).sort_values(["config", "_o"]).drop(columns=["_o"])
    keep = ["config", "part", "kernels", "ms", "share_pct", "theoretical_occupancy_tw_pct"]
    keep += ["est_occupancy_tw_pct", "registers_per_thread_tw", "shared_mem_kib_tw"]
    return t[keep].reset_index(drop=True)


def conv_occupancy(table, precision: str) -> pd.DataFrame:
    """Per width: the convolutions' time-weighted occupancy (%) in fp16 and ``precision``, and
    the gap (points)."""
    rows = []
    conv = table[table.part.isin(CONV_PARTS)]

    def tw(config, col):
        g = conv[conv.config == config]
        return weighted_mean(g[col], g.ms)

    for w, c16, c8 in trace_pairs(table.config.unique(), precision):
        t16, t8 = tw(c16, "theoretical_occupancy_tw_pct"), tw(c8, "theoretical_occupancy_tw_pct")
        rows.append(dict(
            width=w, precision=precision, fp16_theoretical_pct=t16, theoretical_pct=t8,
            theoretical_gap_pts=t8 - t16, fp16_est_pct=tw(c16, "est_occupancy_tw_pct"),
            est_pct=tw(c8, "est_occupancy_tw_pct"),
        ))  # fmt: skip
    return pd.DataFrame(rows)


def conv_occupancy_facts(occ, precision: str, dataset: str) -> list[dict]:
    """The largest theoretical-occupancy gap (points) of :func:`conv_occupancy`."""
    if occ.empty or not occ.theoretical_gap_pts.notna().any():
        return []
    gap = float(occ.theoretical_gap_pts.abs().max())
    return [fact(f"{precision}_conv_occupancy_gap_max", gap, "points", datasets=(dataset,))]


def occupancy_facts(root: DataRoot) -> list[dict]:
    """:func:`conv_occupancy_facts` of each 8-bit trace (:data:`TRACES_8BIT`) ``root`` holds."""
    out = []
    for prec, name in TRACES_8BIT.items():
        if root.has(name):
            occ = conv_occupancy(part_occupancy(root.load(name)), prec)
            out += conv_occupancy_facts(occ, prec, name)
    return out


def facts_8bit(root: DataRoot) -> list[dict]:
    """The 8-bit facts of ``root``."""
    out = []
    if root.has(BENCH_8BIT):
        speed = engine_speed(root.load(BENCH_8BIT))
        if len(speed):
            out += speed_facts(speed)
    if root.has(NUMERICS_8BIT):
        numerics = root.load(NUMERICS) if root.has(NUMERICS) else None
        out += error_facts(error_table(root.load(NUMERICS_8BIT), numerics))
    if root.has(TRACE_INT8):
        out += trace_facts(trace_table(int8_breakdown(root.load(TRACE_INT8))))
    out += occupancy_facts(root)
    if root.has(int8_kernels.INT8_KERNELS):  # which int8 convolution kernel is fastest
        out += int8_kernels.facts_of(root.load(int8_kernels.INT8_KERNELS), root)
    return out

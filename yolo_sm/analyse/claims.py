"""Facts for the reference articles' claims (notebook 07), read off one dataset root.

:func:`facts` returns one fact per measurable claim (keys ``claims.*``); a claim whose dataset
the root lacks, or that nothing here can measure (mAP without labelled data, INT8 without an
INT8 engine, latency at an arrival rate below capacity without such rows), has no fact and its
rule (:data:`yolo_sm.report.claims.CLAIMS_RULES`) reads "not tested". Each fact is one small
pure function of a table, so a test can feed it a few rows. Nothing here judges.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yolo_sm.analyse import fast
from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.weighting import time_weighted, weighted_mean
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config

NAN = math.nan
CONV_CLASSES = ("tensor_core_conv", "simt_conv", "tensor_core_gemm", "simt_gemm")

#: the articles' figures a few facts are measured against
CLAIMED_FLOPS_RISE_W125_PCT = 56.0
CLAIMED_IMAGE_MEMORY_BYTES = 1.2e9
CLAIMED_FRAME_COPY_MS = 0.08


def factor_off(measured: float, claimed: float) -> float:
    """How many times ``measured`` is off ``claimed`` either way (1.0: equal; 2.0: twice or
    half); NaN unless both are positive."""
    if not (measured > 0 and claimed > 0):
        return NAN
    return max(measured / claimed, claimed / measured)


def _width(config: str) -> float:
    return parse_config(config, strict=False)["width"]


def _eager(sweep: pd.DataFrame) -> pd.DataFrame:
    ok = sweep[sweep["status"] == "ok"] if "status" in sweep else sweep
    return ok[ok["backend"] == "eager"]


# ---- claim 1: FLOPs of width x1.25 ---------------------------------------------------------


def flops_rise_pct(sweep: pd.DataFrame, a: float = 1.0, b: float = 1.25) -> float:
    """Rise of FLOPs per image from width ``a`` to ``b`` (%), from a sweep's ``flops_per_img``."""
    f = sweep.groupby("width")["flops_per_img"].first()
    if a not in f.index or b not in f.index:
        return NAN
    return (float(f[b]) / float(f[a]) - 1) * 100


# ---- claims 2 and 3: occupancy against width ----------------------------------------------


def occupancy_by_width(ncu: pd.DataFrame) -> pd.Series:
    """Time-weighted achieved occupancy (%) of one forward per width, from an Nsight Compute
    table of one config per width (``ncu_width_b8``)."""
    tw = time_weighted(ncu, "config")
    return pd.Series(
        tw["achieved_occupancy_tw_pct"].to_numpy(), index=tw["config"].map(_width)
    ).sort_index()


def occupancy_drop_pp(occ: pd.Series, a: float = 1.0, b: float = 1.5) -> float:
    """Percentage points achieved occupancy falls from width ``a`` to ``b`` (negative: rises)."""
    if a not in occ.index or b not in occ.index:
        return NAN
    return float(occ[a] - occ[b])


def min_occupancy_up_to(occ: pd.Series, width: float = 1.25) -> float:
    """The lowest time-weighted achieved occupancy (%) of the widths up to ``width``."""
    small = occ[occ.index <= width + 1e-9]
    return float(small.min()) if len(small) else NAN


# ---- claim 4: blocks per SM of the convolutions, fp32 NCHW against fp16 NHWC ---------------


def conv_blocks(ncu: pd.DataFrame, config: str) -> tuple[float, float]:
    """(resident blocks per SM, shared memory per block in bytes) of ``config``'s convolution
    and GEMM kernels, time-weighted; blocks per SM is the smallest of the ``limit_*`` columns."""
    k = add_kernel_class(ncu[ncu["config"] == config])
    k = k[k["kernel_class"].isin(CONV_CLASSES)]
    limits = [c for c in k.columns if c.startswith("limit_")]
    if k.empty or not limits:
        return NAN, NAN
    blocks = k[limits].min(axis=1)
    w = k["duration_us"]
    return weighted_mean(blocks, w), weighted_mean(k["shared_mem_per_block_bytes"], w)


# ---- claim 5 and 7: throughput against batch -----------------------------------------------


def eager_img_per_s(sweep: pd.DataFrame, width: float) -> pd.Series:
    """Eager img/s per batch at ``width``."""
    e = _eager(sweep)
    return e[(e["width"] - width).abs() < 1e-9].groupby("batch")["img_per_s"].median()


def batch_over_best(img: pd.Series, batch: int = 4, among=(1, 2, 4, 8, 16)) -> float:
    """img/s at ``batch`` over the best img/s of the batches ``among`` that were measured."""
    have = img.reindex([b for b in among if b in img.index])
    if batch not in have.index or have.empty:
        return NAN
    return float(have[batch] / have.max())


def batch_gain(img: pd.Series, a: int = 1, b: int = 32) -> float:
    """img/s at batch ``b`` over img/s at batch ``a``."""
    if a not in img.index or b not in img.index:
        return NAN
    return float(img[b] / img[a])


# ---- claim 6: what the kernels under 60 % occupancy do -------------------------------------


def tensor_pipe_under(ncu: pd.DataFrame, cut: float = 60.0) -> float:
    """Time-weighted tensor-pipe use (% of peak) of the kernels under ``cut`` % theoretical
    occupancy, over every config of the table."""
    lo = ncu[ncu["theoretical_occupancy_pct"] < cut]
    if lo.empty or "tensor_pipe_pct" not in lo:
        return NAN
    return weighted_mean(lo["tensor_pipe_pct"], lo["duration_us"])


# ---- claim 8: memory per image -------------------------------------------------------------


def memory_per_image(sweep: pd.DataFrame, width: float = 1.0) -> float:
    """Bytes of peak memory one more image adds (slope of a line through eager peak memory
    against batch at ``width``); NaN with fewer than two batches."""
    e = _eager(sweep)
    e = e[((e["width"] - width).abs() < 1e-9) & e["peak_mem_bytes"].notna()]
    if e["batch"].nunique() < 2:
        return NAN
    return float(np.polyfit(e["batch"], e["peak_mem_bytes"], 1)[0])


# ---- claim 10: 8-bit over fp16 -------------------------------------------------------------


def eight_bit_over_fp16(bench: pd.DataFrame, precision: str, batch: int = 64) -> float:
    """Median over widths >= 1.0 of the best ``precision`` engine's img/s over the fp16 engine
    of the same backend, at ``batch`` (:func:`yolo_sm.analyse.fast.eight_bit_speedup`)."""
    sp = fast.eight_bit_speedup(bench, batch=batch, min_width=1.0)
    sp = sp[sp["variant"].str.split("/").str[1] == precision]
    return float(sp.groupby("width")["speedup"].max().median()) if len(sp) else NAN


# ---- claim 11: what fusing C2f can remove --------------------------------------------------


def c2f_fusion_bound(trace: pd.DataFrame, iteration: int = 0) -> float:
    """The largest share (%) of an eager forward's kernel launches that fusing each C2f block
    into one kernel would remove, over the configs of a Kineto table with layers."""
    t = trace[trace["iteration"] == iteration]
    shares = []
    for _, g in t.groupby("config"):
        f = g[g["module_type"] == "C2f"]
        if len(g):
            shares.append((len(f) - f["layer"].nunique()) / len(g) * 100)
    return max(shares) if shares else NAN


# ---- claim 12: one frame host to device ----------------------------------------------------


def ceiling(ceilings: pd.DataFrame, name: str) -> float:
    """The value of ceiling ``name`` (NaN when absent)."""
    hit = ceilings[ceilings["ceiling"] == name]
    return float(hit["value"].iloc[0]) if len(hit) else NAN


# ---- claim 13: jitter at an arrival rate below capacity ------------------------------------


def jitter_cut_below_capacity(bench: pd.DataFrame) -> float:
    """Median share (%) by which several streams cut jitter (p99 - p50 latency) against one
    stream, over pipeline rows fed at an ``arrival_img_per_s`` below the pipeline's capacity
    (its closed-loop img/s, same width, batch, engine and streams). NaN when the bench holds
    no such open-loop rows: closed-loop latencies include queueing behind batches in flight."""
    if "arrival_img_per_s" not in bench or "streams" not in bench:
        return NAN
    ok = bench[(bench["status"] == "ok") & bench["variant"].str.startswith("pipeline/")].copy()
    ok["engine"] = ok["variant"].str.rsplit("/", n=1).str[0]
    keys = ["width", "batch", "engine", "streams"]
    closed = ok[ok["arrival_img_per_s"].isna()].groupby(keys)["img_per_s"].max().rename("cap")
    open_ = ok[ok["arrival_img_per_s"].notna()].join(closed, on=keys, how="inner")
    open_ = open_[open_["arrival_img_per_s"] < open_["cap"]]
    if open_.empty:
        return NAN
    open_ = open_.assign(jitter=open_["p99_ms"] - open_["median_ms"])
    at = ["width", "batch", "engine", "arrival_img_per_s"]
    one = open_[open_["streams"] == 1].set_index(at)["jitter"].rename("jitter_1")
    multi = open_[open_["streams"] >= 2].join(one, on=at, how="inner")
    if multi.empty:
        return NAN
    return float((1 - multi["jitter"] / multi["jitter_1"]).median() * 100)


# ---- claim 14: ResNet-101 stages -----------------------------------------------------------


def resnet_bounds(ncu: pd.DataFrame, early: str = "layer1", deep: str = "layer4") -> float:
    """The weaker of the early stage's DRAM throughput and the deep stage's SM throughput
    (time-weighted, % of peak): high only when early layers are bandwidth-bound and deep ones
    compute-bound."""
    cols = ("dram_throughput_pct", "sm_throughput_pct")
    tw = time_weighted(ncu[ncu["layer"] != ""], "layer", cols).set_index("layer")
    if early not in tw.index or deep not in tw.index:
        return NAN
    return float(min(tw.loc[early, "dram_throughput_tw_pct"], tw.loc[deep, "sm_throughput_tw_pct"]))


# ---- claim 15: SM throughput of the neck's convolutions ------------------------------------


def neck_conv_sm_throughput(ncu: pd.DataFrame) -> float:
    """The lowest time-weighted SM throughput (% of peak) of a neck Conv layer (all its
    kernels), over the configs of an Nsight Compute throughput table."""
    neck = ncu[(ncu["stage"] == "neck") & (ncu["module_type"] == "Conv")]
    if neck.empty or "sm_throughput_pct" not in neck:
        return NAN
    tw = time_weighted(neck, ["config", "layer"], ("sm_throughput_pct",))
    return float(tw["sm_throughput_tw_pct"].min())


# ---- claim 16: layouts ---------------------------------------------------------------------


def nhwc_speedup(ncu: pd.DataFrame) -> float:
    """The best ratio over precisions of an NCHW forward's GPU time to the NHWC forward's
    (summed kernel durations); above 1: NHWC is faster for some precision."""
    t = ncu.groupby("config")["duration_us"].sum()
    ratios = []
    for cfg, us in t.items():
        if "_nchw_" in cfg and cfg.replace("_nchw_", "_nhwc_") in t.index:
            ratios.append(float(us) / float(t[cfg.replace("_nchw_", "_nhwc_")]))
    return max(ratios) if ratios else NAN


# ---- all of them ---------------------------------------------------------------------------


def facts(root: DataRoot) -> pd.DataFrame:
    """The claims' facts from ``root`` (keys ``claims.*``); claims whose datasets the root
    lacks have no fact."""
    rows = []
    add = rows.append
    if root.has("sweep_fp16_nhwc"):
        s = root.load("sweep_fp16_nhwc")
        d = ("sweep_fp16_nhwc",)
        rise = flops_rise_pct(s)
        add(
            fact(
                "claims.flops_rise_w1.25_off_claim_pp",
                abs(rise - CLAIMED_FLOPS_RISE_W125_PCT),
                "pp",
                datasets=d,
                note=f"FLOPs per image rise {rise:.1f} % from width 1.0 to 1.25",
            )
        )
        img1 = eager_img_per_s(s, 1.0)
        add(fact("claims.img_per_s_b4_over_best_b1_16", batch_over_best(img1), "x", datasets=d))
        add(
            fact(
                "claims.img_per_s_b32_over_b1_w0.5",
                batch_gain(eager_img_per_s(s, 0.5)),
                "x",
                datasets=d,
            )
        )
        per_image = memory_per_image(s, 1.0)
        add(
            fact(
                "claims.image_memory_off_claim",
                factor_off(per_image, CLAIMED_IMAGE_MEMORY_BYTES),
                "x",
                datasets=d,
                note=f"{per_image / 1e6:.0f} MB per 640x640 image at width 1.0",
            )
        )
    if root.has("ncu_width_b8"):
        occ = occupancy_by_width(root.load("ncu_width_b8"))
        d = ("ncu_width_b8",)
        add(fact("claims.occupancy_drop_w1_to_w1.5_pp", occupancy_drop_pp(occ), "pp", datasets=d))
        add(fact("claims.min_occupancy_up_to_w1.25_pct", min_occupancy_up_to(occ), "%", datasets=d))
    if root.has("ncu_precision_w1"):
        n = root.load("ncu_precision_w1")
        d = ("ncu_precision_w1",)
        b32, s32 = conv_blocks(n, "yolov8_w1_fp32_nchw_b8")
        b16, s16 = conv_blocks(n, "yolov8_w1_fp16_nhwc_b8")
        add(
            fact(
                "claims.conv_blocks_per_sm_fp16_nhwc_over_fp32_nchw",
                b16 / b32,
                "x",
                datasets=d,
                note=f"shared memory per conv block {s32 / 1e3:.0f} -> {s16 / 1e3:.0f} kB",
            )
        )
        add(fact("claims.nchw_over_nhwc_time_best", nhwc_speedup(n), "x", datasets=d))
    if root.has("ncu_throughput_w1"):
        n = root.load("ncu_throughput_w1")
        d = ("ncu_throughput_w1",)
        add(
            fact("claims.tensor_pipe_pct_under_60_occupancy", tensor_pipe_under(n), "%", datasets=d)
        )
        add(
            fact(
                "claims.neck_conv_sm_throughput_min_pct",
                neck_conv_sm_throughput(n),
                "%",
                datasets=d,
            )
        )
    if root.has("bench_fast_engines"):
        b = root.load("bench_fast_engines")
        d = ("bench_fast_engines",)
        add(fact("claims.fp8_over_fp16_b64", eight_bit_over_fp16(b, "fp8"), "x", datasets=d))
        add(fact("claims.int8_over_fp16_b64", eight_bit_over_fp16(b, "int8"), "x", datasets=d))
        add(
            fact(
                "claims.jitter_cut_below_capacity_pct",
                jitter_cut_below_capacity(b),
                "%",
                datasets=d,
            )
        )
    if root.has("trace_width_b8"):
        add(
            fact(
                "claims.c2f_fusion_removes_at_most_pct",
                c2f_fusion_bound(root.load("trace_width_b8")),
                "%",
                datasets=("trace_width_b8",),
            )
        )
    if root.has("ceilings"):
        c = root.load("ceilings")
        ms = ceiling(c, "copy_h2d_frame_fp16")
        add(
            fact(
                "claims.frame_copy_off_claim",
                factor_off(ms, CLAIMED_FRAME_COPY_MS),
                "x",
                datasets=("ceilings",),
                note=f"{ms:.3f} ms for one 640x640x3 fp16 frame from pinned memory",
            )
        )
    if root.has("ncu_resnet101"):
        add(
            fact(
                "claims.resnet_weaker_bound_pct",
                resnet_bounds(root.load("ncu_resnet101")),
                "%",
                datasets=("ncu_resnet101",),
            )
        )
    return facts_table(r for r in rows if not math.isnan(r["value"]))

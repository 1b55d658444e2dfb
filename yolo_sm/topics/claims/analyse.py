"""Facts for the articles' claims (notebook 09) that no topic computes (keys ``claims.*``): a
claim's own measurement or a figure derived from topic facts. A claim without data has no fact
and reads "not tested"."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import clock_spread_pct, concat, fact, facts_table, sm_clock_mhz, value
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.weighting import time_weighted, weighted_mean
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.hardware import ceiling
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.heatmaps import analyse as heatmaps
from yolo_sm.topics.roofline import analyse as roofline

NAN = math.nan
CONV_CLASSES = ("tensor_core_conv", "simt_conv", "tensor_core_gemm", "simt_gemm")

#: the bench that times fp16, int8 and fp8 engines of one model side by side
BENCH_8BIT = "bench_8bit"
NCU_T, FAST = "ncu_throughput_w1", "bench_fast_engines"

#: the articles' figures a few facts are measured against
CLAIMED_IMAGE_MEMORY_BYTES = 1.2e9
CLAIMED_FRAME_COPY_MS = 0.08

#: The topics' facts functions whose facts the claims read (or derive from).
TOPICS = (heatmaps.facts, batch.facts, roofline.facts)

# the topic facts the derived facts read (key, scope)
OCCUPANCY = "achieved_occupancy_tw_pct"  # heatmaps, scope width=<w>
MEMORY_PER_IMAGE = "batch_memory_per_image_gb"  # batch, eager, reference width and size
RESNET_EARLY_DRAM = roofline.PREFIX + "resnet_early_min_dram_pct"
RESNET_DEEP_SM = roofline.PREFIX + "resnet_deep_min_sm_pct"


def factor_off(measured: float, claimed: float) -> float:
    """How many times ``measured`` is off ``claimed`` either way; NaN unless both > 0."""
    if not (measured > 0 and claimed > 0):
        return NAN
    return max(measured / claimed, claimed / measured)


def occupancy_drop_pp(topic: pd.DataFrame, a: float = 1.0, b: float = 1.5) -> float:
    """Points the forward's achieved occupancy falls from width ``a`` to ``b``."""
    return value(topic, OCCUPANCY, f"width={a:g}") - value(topic, OCCUPANCY, f"width={b:g}")


def conv_blocks(ncu: pd.DataFrame, config: str) -> tuple[float, float]:
    """Time-weighted (blocks per SM, shared memory bytes per block) of ``config``'s
    conv and GEMM kernels."""
    k = add_kernel_class(ncu[ncu["config"] == config])
    k = k[k["kernel_class"].isin(CONV_CLASSES)]
    limits = [c for c in k.columns if c.startswith("limit_")]
    if k.empty or not limits:
        return NAN, NAN
    blocks = k[limits].min(axis=1)
    w = k["duration_us"]
    return weighted_mean(blocks, w), weighted_mean(k["shared_mem_per_block_bytes"], w)


def eager_img_per_s(sweep: pd.DataFrame, width: float) -> pd.Series:
    """Eager img/s per batch at ``width`` and the sweep's reference image size."""
    t = batch.batch_table(sweep)
    if "imgsz" in t:
        t = t[t["imgsz"] == batch.ref_imgsz(t)]
    e = t[(t["backend"] == "eager") & ((t["width"] - width).abs() < 1e-9)]
    return e.groupby("batch")["img_per_s"].median()


def batch_over_best(img: pd.Series, batch: int = 4, among=(1, 2, 4, 8, 16)) -> float:
    """img/s at ``batch`` over the best img/s of the measured batches ``among``."""
    have = img.reindex([b for b in among if b in img.index])
    if batch not in have.index or have.empty:
        return NAN
    return float(have[batch] / have.max())


def batch_gain(img: pd.Series, a: int = 1, b: int = 32) -> float:
    """img/s at batch ``b`` over img/s at batch ``a``."""
    if a not in img.index or b not in img.index:
        return NAN
    return float(img[b] / img[a])


def image_memory_off(topic: pd.DataFrame) -> float:
    """How many times the measured memory per image is off the article's 1.2 GB."""
    return factor_off(value(topic, MEMORY_PER_IMAGE) * 1e9, CLAIMED_IMAGE_MEMORY_BYTES)


#: the 8-bit claim's engines: the bench's CUDA graph of each precision, same unit and process
EIGHT_BIT_BACKEND = "cudagraph"


def eight_bit_vs_fp16(
    bench: pd.DataFrame, precision: str = "int8", batch: int = 64, min_width: float = 1.0
) -> pd.DataFrame:
    """Per width >= ``min_width`` at ``batch``: the ``precision`` CUDA graph against
    the fp16 one of the same bench: img/s, ``ratio``, SM clocks (MHz), ``clock_spread_pct`` and
    ``ratio_at_equal_clock``."""
    ok = bench[(bench["status"] == "ok") & (bench["backend"] == EIGHT_BIT_BACKEND)]
    if "scope" in ok:
        ok = ok[ok["scope"] == "model_only"]
    ok = ok[(ok["batch"] == batch) & (ok["width"] >= min_width)].assign(clock=sm_clock_mhz(ok))
    cols = ["width", "img_per_s", "clock"]
    a = ok[ok["precision"] == precision][cols]
    b = ok[ok["precision"] == "fp16"][cols]
    t = a.merge(b, on="width", suffixes=("", "_fp16")).sort_values("width")
    t = t.rename(columns={"img_per_s_fp16": "fp16_img_per_s", "clock": "clock_mhz",
                          "clock_fp16": "fp16_clock_mhz"})  # fmt: skip
    t["ratio"] = t["img_per_s"] / t["fp16_img_per_s"]
    pairs = zip(t.clock_mhz, t.fp16_clock_mhz, strict=True)
    t["clock_spread_pct"] = [clock_spread_pct(x, y) for x, y in pairs]
    t["ratio_at_equal_clock"] = t["ratio"] * t["fp16_clock_mhz"] / t["clock_mhz"]
    return t.reset_index(drop=True)


def eight_bit_fact(bench: pd.DataFrame, precision: str, dataset: str) -> dict:
    """The 8-bit claim's fact: the smallest ratio over widths, with the largest clock
    spread; per-width ratios in its note."""
    t = eight_bit_vs_fp16(bench, precision)
    by_w = ", ".join(
        f"width {w:g}: {r:.2f}x at clocks {c:.0f} % apart ({q:.2f}x per MHz)"
        for w, r, c, q in zip(t.width, t.ratio, t.clock_spread_pct, t.ratio_at_equal_clock,
                              strict=True)
    )  # fmt: skip
    return fact(
        f"claims.{precision}_over_fp16_cudagraph_b64_min",
        t["ratio"].min() if len(t) else NAN,
        "x",
        datasets=(dataset,),
        note=by_w,
        clock_spread_pct=t["clock_spread_pct"].max() if len(t) else NAN,
    )


def jitter_cut_below_capacity(bench: pd.DataFrame) -> float:
    """Median % by which several streams cut jitter (p99 - p50) against
    one, over pipeline rows fed below capacity; NaN without such open-loop rows."""
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


def resnet_weaker_bound(topic: pd.DataFrame) -> float:
    """The weaker of ResNet's early-stage DRAM and deep-stage SM throughput (%)."""
    return min(value(topic, RESNET_EARLY_DRAM), value(topic, RESNET_DEEP_SM))


def neck_conv_sm_throughput(ncu: pd.DataFrame) -> float:
    """The lowest time-weighted SM throughput (%) of a neck Conv layer."""
    neck = ncu[(ncu["stage"] == "neck") & (ncu["module_type"] == "Conv")]
    if neck.empty or "sm_throughput_pct" not in neck:
        return NAN
    tw = time_weighted(neck, ["config", "layer"], ("sm_throughput_pct",))
    return float(tw["sm_throughput_tw_pct"].min())


def topic_facts(root: DataRoot) -> pd.DataFrame:
    """The facts of :data:`TOPICS` from ``root``, which the claims' rules also read."""
    return concat(*map(root.facts, TOPICS))


def derived(topic: pd.DataFrame) -> list[dict]:
    """The claims' facts derived from topic facts (claims 2, 8 and 14)."""
    ds_of = dict(zip(topic.key + "|" + topic.scope, topic.datasets, strict=True))

    def ds(*pairs) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for p in pairs for d in ds_of.get("|".join(p), ())))

    w1, w15 = (OCCUPANCY, "width=1"), (OCCUPANCY, "width=1.5")
    per_image = value(topic, MEMORY_PER_IMAGE)
    return [
        fact("claims.occupancy_drop_w1_to_w1.5_pp", occupancy_drop_pp(topic), "pp",
             datasets=ds(w1, w15), note="heatmaps: achieved_occupancy_tw_pct, width=1 - width=1.5"),
        fact("claims.image_memory_off_claim", image_memory_off(topic), "x",
             datasets=ds((MEMORY_PER_IMAGE, "")),
             note=f"batch_memory_per_image_gb: {per_image * 1e3:.0f} MB per image"),
        fact("claims.resnet_weaker_bound_pct", resnet_weaker_bound(topic), "%",
             datasets=ds((RESNET_EARLY_DRAM, ""), (RESNET_DEEP_SM, "")),
             note=f"min of {RESNET_EARLY_DRAM} and {RESNET_DEEP_SM}"),
    ]  # fmt: skip


#: the facts a rule reads
FACT_KEYS = frozenset(
    """
    claims.conv_blocks_per_sm_fp16_nhwc_over_fp32_nchw
    claims.fp16_map_drop_pct claims.fp8_over_fp16_cudagraph_b64_min claims.frame_copy_off_claim
    claims.image_memory_off_claim claims.img_per_s_b32_over_b1_w0.5
    claims.img_per_s_b4_over_best_b1_16 claims.int8_over_fp16_cudagraph_b64_min
    claims.jitter_cut_below_capacity_pct claims.neck_conv_sm_throughput_min_pct
    claims.occupancy_drop_w1_to_w1.5_pp claims.resnet_weaker_bound_pct
    """.split()
)


def facts(root: DataRoot, topic: pd.DataFrame | None = None) -> pd.DataFrame:
    """The claims' own facts from ``root``; none where a dataset is lacking."""
    topic = topic_facts(root) if topic is None else topic
    rows = derived(topic)
    if root.has("sweep_fp16_nhwc"):
        s, d = root.load("sweep_fp16_nhwc"), ("sweep_fp16_nhwc",)
        rows += [
            fact("claims.img_per_s_b4_over_best_b1_16", batch_over_best(eager_img_per_s(s, 1.0)),
                 "x", datasets=d),
            fact("claims.img_per_s_b32_over_b1_w0.5", batch_gain(eager_img_per_s(s, 0.5)), "x",
                 datasets=d),
        ]  # fmt: skip
    if root.has("ncu_precision_w1"):
        n = root.load("ncu_precision_w1")
        b32, s32 = conv_blocks(n, "yolov8_w1_fp32_nchw_b8")
        b16, s16 = conv_blocks(n, "yolov8_w1_fp16_nhwc_b8")
        note = f"shared memory per conv block {s32 / 1e3:.0f} -> {s16 / 1e3:.0f} kB"
        key, d = "claims.conv_blocks_per_sm_fp16_nhwc_over_fp32_nchw", ("ncu_precision_w1",)
        rows.append(fact(key, b16 / b32, "x", datasets=d, note=note))
    if root.has("ncu_throughput_w1"):
        v = neck_conv_sm_throughput(root.load("ncu_throughput_w1"))
        rows.append(fact("claims.neck_conv_sm_throughput_min_pct", v, "%", datasets=(NCU_T,)))
    if root.has(BENCH_8BIT):
        rows += [eight_bit_fact(root.load(BENCH_8BIT), p, BENCH_8BIT) for p in ("int8", "fp8")]
    if root.has("bench_fast_engines"):
        v = jitter_cut_below_capacity(root.load("bench_fast_engines"))
        rows.append(fact("claims.jitter_cut_below_capacity_pct", v, "%", datasets=(FAST,)))
    copy = ceiling(root, "copy_h2d_frame_fp16")
    if copy is not None:
        ms, where = copy
        note = f"{ms:.3f} ms for one 640x640x3 fp16 frame from pinned memory ({where})"
        v = factor_off(ms, CLAIMED_FRAME_COPY_MS)
        rows.append(fact("claims.frame_copy_off_claim", v, "x", datasets=("ceilings",), note=note))
    return facts_table(r for r in rows if not math.isnan(r["value"]))

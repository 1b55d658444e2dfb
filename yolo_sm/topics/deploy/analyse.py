"""Notebook 10's tables and facts (``fast.*``): the deploy bench (ratios within one process's
(model, batch) unit), where a compiled engine's GPU time goes, cold and warm compile builds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yolo_sm.analyse.bench_table import (
    BASELINE,
    EIGHT_BIT,
    complete_bench,
    engines,
    scope,
    variant_order,
)
from yolo_sm.analyse.facts import clock_spread_pct, fact, facts_table, sm_clock_mhz
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError
from yolo_sm.topics.deploy import frames

#: the benches notebook 10's ranking reads, first choice first: per batch size, the first of
#: them that holds it (``bench_deploy`` is what ``yolo-sm bench`` runs by default)
DEPLOY_BENCHES = ("bench_deploy", "bench_fast_engines")
BENCH = "bench_fast_engines"
AUTOTUNE_DATASET = "bench_autotune"
TRACE_FP8 = "trace_fp8_w1_b64"
TRACE_COMPILE = "trace_compile_w1_b64"
COPYFREE = "bench_copyfree"
#: label -> Kineto table: the copy-free engine and one CUDA graph of the eager model, same config
COPYFREE_TRACES = {"copy-free": "trace_copyfree_w1_b64", "CUDA graph": "trace_graph_w1_b64"}


def deploy_bench(root: DataRoot) -> pd.DataFrame:
    """Per batch size the complete units of the first of :data:`DEPLOY_BENCHES` that holds it,
    with a ``dataset`` column."""
    parts, seen = [], set()
    for name in DEPLOY_BENCHES:
        if root.has(name):
            b = complete_bench(root, name)
            b = b[~b["batch"].isin(seen)]
            seen |= set(b["batch"])
            parts.append(b.assign(dataset=name))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def side_by_side(bench, extra: tuple[str, ...] = ()):
    """Per (width, batch, variant) in run order: status, img/s, ratio to the baseline, latency
    (ms), build s and the ``extra`` columns."""
    cols = ["width", "batch", "variant", "status", "img_per_s", "vs_baseline", "median_ms"]
    cols = [c for c in (*cols, "p99_ms", "build_s", *extra) if c in bench]
    order = {v: i for i, v in enumerate(variant_order(bench))}
    out = bench[cols].assign(_o=bench["variant"].map(order))
    return out.sort_values(["width", "batch", "_o"]).drop(columns="_o").reset_index(drop=True)


def failures(bench):
    """The rows that did not run (status oom / error) and why."""
    bad = bench[bench["status"] != "ok"]
    return bad[["width", "batch", "variant", "status", "message"]].reset_index(drop=True)


#: kernel names of the 8-bit engines' activation quantisers (core.engines fp8 / int8)
QUANTISERS = ("_quantize", "_quantize_int8")


def _triton(kernels, ops: str):
    return (kernels.kernel_class == "triton") & kernels.kernel_name.str.contains(ops, regex=True)


PARTS = (  # (part, test on a kernel row), first match wins
    ("8-bit quantisation", lambda k: k.kernel_name.isin(QUANTISERS)),
    # inductor's kernels by the ops it names them after (triton_poi_fused_<op>_...); a kernel
    # fusing two of these counts in the first
    ("pooling (Triton)", lambda k: _triton(k, "max_pool")),
    ("8-bit quantisation (Triton)", lambda k: _triton(k, r"clamp.*trunc")),
    ("upsample (Triton)", lambda k: _triton(k, "_unsafe_index")),
    ("fused by torch.compile (Triton)", lambda k: k.kernel_class == "triton"),
    (
        "convolution (tensor cores)",
        lambda k: k.kernel_class.isin(["tensor_core_conv", "simt_conv"]),
    ),
    ("GEMM (1x1 convs)", lambda k: k.kernel_class.isin(["tensor_core_gemm", "simt_gemm"])),
    ("add (bias, residual)", lambda k: k.kernel_name.str.contains("CUDAFunctor_add", regex=False)),
    ("SiLU", lambda k: k.kernel_name.str.contains("silu", case=False, regex=False)),
    ("copy / concat", lambda k: k.kernel_class == "copy_concat"),
    ("pooling / upsample", lambda k: k.kernel_class == "pooling_upsample"),
)
CONV_PARTS = ("convolution (tensor cores)", "GEMM (1x1 convs)")
#: the convolutions' epilogues: eager's ATen kernels, or inductor's kernels that fuse them
EPILOGUE = ("add (bias, residual)", "SiLU", "fused by torch.compile (Triton)")
QUANTISE_PARTS = ("8-bit quantisation", "8-bit quantisation (Triton)")


def kernel_parts(kernels):
    """The part (:data:`PARTS`, first match; ``other`` for the rest) of each kernel row."""
    part = np.full(len(kernels), "other", dtype=object)
    for name, test in reversed(PARTS):  # earlier parts overwrite later ones
        part[np.asarray(test(kernels), dtype=bool)] = name
    return pd.Series(part, index=kernels.index, name="part")


def part_order(parts) -> list[str]:
    present = set(parts)
    return [p for p, _ in PARTS if p in present] + (["other"] if "other" in present else [])


def time_breakdown(kernels):
    """GPU ms per forward by part (rows) and config (columns) of a Kineto table, ``total`` last."""
    k = kernels.assign(part=kernel_parts(kernels))
    forwards = k.groupby("config").iteration.nunique()
    t = k.pivot_table(index="part", columns="config", values="duration_us", aggfunc="sum")
    t = t.fillna(0.0).div(forwards, axis=1) / 1e3
    t = t.loc[part_order(t.index)]
    t.loc["total"] = t.sum()
    return t


def part_ms(breakdown, config: str, parts) -> float:
    """ms per forward of ``config`` in ``parts`` of a :func:`time_breakdown` (absent: 0)."""
    return float(breakdown.loc[breakdown.index.intersection(list(parts)), config].sum())


def compare_backends(tables: dict, config: str):
    """Kernel tables (label -> table) of one ``config`` as one, ``config`` set to the label."""
    parts = []
    for label, k in tables.items():
        k = k[k.config == config]
        if k.empty:
            raise UserError(f"no kernels of config {config!r} in the {label!r} table")
        parts.append(k.assign(config=label))
    return pd.concat(parts, ignore_index=True)


def kernels_per_forward(kernels):
    return kernels.groupby("config").size() / kernels.groupby("config").iteration.nunique()


def compiled(root: DataRoot):
    """Eager fp16's and torch.compile's kernels of one config as one table, and the config."""
    fp8 = root.load(TRACE_FP8)
    fp16 = next(c for c in fp8["config"].unique() if "_fp16_" in c)
    return compare_backends({"eager": fp8, "compile": root.load(TRACE_COMPILE)}, fp16), fp16


def roof_shares(bench, peaks: dict):
    """Per (width, batch) each model-only engine, fastest first: img/s, its ratio to the
    baseline, TFLOP/s and ``roof_pct``, its share (%) of ``peaks[precision]`` (TFLOP/s)."""
    e = engines(bench, baseline=True)
    e = e.assign(roof_pct=100 * e["tflops"] / e["precision"].map(peaks).astype(float))
    cols = ["width", "batch", "variant", "img_per_s", "vs_baseline", "tflops", "roof_pct"]
    e = e.sort_values(["width", "batch", "img_per_s"], ascending=[True, True, False])
    return e[cols + ["sm_clock_mhz"]].reset_index(drop=True)


def copyfree_traces(root: DataRoot):
    """The :data:`COPYFREE_TRACES` present in ``root`` as one table of the copy-free trace's
    config, and the config."""
    t = {k: root.load(d) for k, d in COPYFREE_TRACES.items() if root.has(d)}
    cfg = t["copy-free"]["config"].iloc[0]
    return compare_backends(t, cfg), cfg


def copyfree_facts(bench=None, kernels=None) -> list[dict]:
    """The least copy-free over CUDA-graph img/s ratio over ``bench``'s (width, batch) units;
    the copy / concat kernels per copy-free forward (``kernels``: :func:`copyfree_traces`)."""
    rows = []
    if bench is not None:
        e = engines(bench).assign(clock=sm_clock_mhz)
        per = e.set_index(["width", "batch", "variant"])[["img_per_s", "clock"]].unstack()
        pair = ["copyfree/fp16/nhwc", "cudagraph/fp16/nhwc"]
        ratio = (per["img_per_s"][pair[0]] / per["img_per_s"][pair[1]]).dropna()
        if len(ratio):
            spread = max(clock_spread_pct(*c) for c in per["clock"].loc[ratio.index, pair].values)
            rows.append(fact("fast.copyfree_over_cudagraph_min", ratio.min(), "x",
                             datasets=(COPYFREE,), points=len(ratio), clock_spread_pct=spread,
                             note=f"least at {scope(*ratio.idxmin())}"))  # fmt: skip
    if kernels is not None:
        b, mine = time_breakdown(kernels), kernels[kernels.config == "copy-free"]
        copies = (kernel_parts(mine) == "copy / concat").sum() / mine.iteration.nunique()
        total, ms = b.loc["total", "copy-free"], part_ms(b, "copy-free", ("copy / concat",))
        rows.append(fact("fast.copyfree_copy_kernels", copies, "kernels",
                         datasets=(COPYFREE_TRACES["copy-free"],),
                         note=f"{ms:.3f} of {total:.1f} ms per forward"))  # fmt: skip
    return rows


CACHE_DATASET = "bench_compile_cache"
CACHE_COLUMNS = (
    "width", "batch", "compile_mode", "cache", "compile_cache", "autotuned_ops", "autotune_reads",
    "compile_s", "build_s", "process_s", "img_per_s", "median_ms", "status", "message",
)  # fmt: skip


def cache_builds(table):
    """One row per build, cold before warm: what it found in the cache, seconds, img/s."""
    order = [c for c in ("width", "batch", "compile_mode", "run") if c in table]
    return table.sort_values(order)[[c for c in CACHE_COLUMNS if c in table]].reset_index(drop=True)


def cache_facts(table) -> list[dict]:
    """Cold over warm ``compile_s`` per (compile mode, width, batch)."""
    ok = table[table["status"] == "ok"]
    rows = []
    for (mode, w, b), g in ok.groupby(["compile_mode", "width", "batch"]):
        cold, warm = g[g["cache"] == "cold"], g[g["cache"] == "warm"]
        if len(cold) and len(warm) and float(warm.compile_s.iloc[0]) > 0:
            ratio = float(cold.compile_s.iloc[0]) / float(warm.compile_s.iloc[0])
            sc = f"mode={mode}, width={float(w):g}, batch={int(b)}"
            rows.append(fact("fast.cold_over_warm_compile", ratio, "x", scope=sc,
                             datasets=(CACHE_DATASET,)))  # fmt: skip
    return rows


def speedup_facts(bench, datasets) -> list[dict]:
    """Per batch: median over units of the fastest 16-bit engine's img/s over the baseline's,
    with the largest clock spread (%)."""
    e = engines(bench, baseline=True)
    e = e[~e["precision"].isin(EIGHT_BIT)] if "precision" in e else e
    e = e.assign(clock=sm_clock_mhz(e))
    keys = [k for k in ("family", "width", "model") if k in e]
    rows = []
    for b, g in e.groupby("batch"):
        best = g.loc[g.groupby(keys)["img_per_s"].idxmax()].set_index(keys)
        base = g[g["variant"] == BASELINE].groupby(keys).first()
        ratio = (best["img_per_s"] / base["img_per_s"]).dropna()
        if ratio.empty:
            continue
        spread = pd.Series(
            [clock_spread_pct(best.at[k, "clock"], base.at[k, "clock"]) for k in ratio.index]
        ).max()
        rows.append(
            fact("fast.best16_img_per_s_over_baseline_median", ratio.median(), "x",
                 scope=f"batch={int(b)}", datasets=datasets, points=len(ratio),
                 clock_spread_pct=spread)
        )  # fmt: skip
    return rows


def predict_facts(bench, datasets) -> list[dict]:
    """The least over units of the fastest pipeline's frames/s over YOLO.predict's."""
    t = frames.pipeline_table(bench)
    ratio = t.groupby(["width", "batch"])["vs_predict"].max().dropna()
    if ratio.empty:
        return []
    worst = ratio.idxmin()
    note = f"least at {scope(*worst)}"
    return [fact("fast.pipeline_over_predict_min", ratio.min(), "x", datasets=datasets, note=note,
                 points=len(ratio))]  # fmt: skip


def compile_facts(both) -> list[dict]:
    """The share (%) of torch.compile's GPU-time saving that comes from the convolutions."""
    b = time_breakdown(both)
    c_e, c_c = part_ms(b, "eager", CONV_PARTS), part_ms(b, "compile", CONV_PARTS)
    t_e, t_c = float(b.loc["total", "eager"]), float(b.loc["total", "compile"])
    clock = sm_clock_mhz(both).groupby(both["config"]).median()
    spread = clock_spread_pct(clock.get("eager", math.nan), clock.get("compile", math.nan))
    saved = t_e - t_c
    return [
        fact("fast.compile_saving_from_convolutions_pct",
             (c_e - c_c) / saved * 100 if saved else math.nan, "%", clock_spread_pct=spread,
             datasets=(TRACE_FP8, TRACE_COMPILE), note=f"{t_e:.1f} -> {t_c:.1f} ms per forward")
    ]  # fmt: skip


#: the facts :func:`facts` computes (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    fast.best16_img_per_s_over_baseline_median fast.pipeline_over_predict_min
    fast.compile_saving_from_convolutions_pct fast.pipeline_graph_over_full_min
    fast.probe_engine_share_pct fast.probe_compiled_stages_over_eager fast.probe_1_over_3_streams
    fast.cold_over_warm_compile fast.copyfree_over_cudagraph_min fast.copyfree_copy_kernels
    """.split()
)


def facts(root: DataRoot):
    """The ``fast.*`` facts of the tables ``root`` holds."""
    rows = []
    bench = deploy_bench(root)
    if len(bench):
        used = tuple(dict.fromkeys(bench["dataset"]))
        rows += speedup_facts(bench, used) + predict_facts(bench, used)
    if root.has(TRACE_FP8) and root.has(TRACE_COMPILE):
        rows += compile_facts(compiled(root)[0])
    benches = {d: complete_bench(root, d) for d in frames.PIPELINE_DATASETS if root.has(d)}
    rows += frames.mode_facts(benches)
    rows += frames.probe_facts({n: root.load(n) for n in root.find_all("probe")})
    if root.has(CACHE_DATASET):
        rows += cache_facts(root.load(CACHE_DATASET))
    has = root.has(COPYFREE_TRACES["copy-free"])
    bench = complete_bench(root, COPYFREE) if root.has(COPYFREE) else None
    rows += copyfree_facts(bench, copyfree_traces(root)[0] if has else None)
    return facts_table(r for r in rows if not math.isnan(r["value"]))

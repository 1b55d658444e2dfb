"""Batch size: throughput, latency, saturation, SM coverage and memory per batch (notebook 03).

Tables from a sweep (img/s and latency per batch, the knee, the CUDA-graph speed-up, memory
lines), from Nsight Compute (SM coverage per batch) and from GPM (whole-GPU medians per batch);
:func:`facts` reads them off a dataset root as numbers for the rules of
:mod:`yolo_sm.topics.batch.rules` (and the article's memory claim). Nothing here judges.
"""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.gpm import SUMMARY_METRICS, gpm_medians
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config as _parse
from yolo_sm.contract.labels import with_config
from yolo_sm.topics.compare.remeasure import compare

GPM_METRICS = SUMMARY_METRICS

# the datasets notebook 03 reads (short names in a root)
SWEEP = "sweep_fp16_nhwc"  # width x batch grid, eager and CUDA graph
SWEEP_1280 = "sweep_1280"  # the same at 1280 px
POOL_SWEEP = "sweep_bf16_nhwc"  # holds the fp16 points again, with each graph's private pool
NCU = "ncu_batch_w1"  # Nsight Compute per kernel, one width, a few batches
GPM = "gpm_batch_w1"  # GPM timeline, one width, batch 1-128

#: the reference config the headline facts describe: this image size where the sweep holds it
#: (else its most measured size, :func:`ref_imgsz`) and the measured width nearest this one
REF_IMGSZ = 640
REF_WIDTH = 1.0
#: the share of GPU memory the article's batch rule spends (safe batch = floor(0.7 x memory /
#: per-image memory)); :func:`memory_budget` spends it with the fitted line instead
MEMORY_BUDGET = 0.7


def parse_config(label: str) -> dict:
    """:func:`yolo_sm.contract.labels.parse_config`, lenient: NaN / None for another form."""
    return _parse(label, strict=False)


# ---- notebook 03: throughput, latency, saturation ----------------------------------------------


def batch_table(sweep):
    """The ok rows of a sweep, one per (imgsz, width, backend, batch), with ``frac_of_best``:
    img/s over the best img/s of the same (imgsz, width, backend) across batches."""
    ok = sweep[sweep["status"] == "ok"]
    cols = [
        c
        for c in (
            "imgsz",
            "width",
            "backend",
            "batch",
            "img_per_s",
            "median_ms",
            "iqr_ms",
            "tflops",
            "peak_mem_bytes",
            "graph_pool_bytes",
            "build_peak_mem_bytes",
            "gpu_busy_ms",
            "noisy",
        )
        if c in ok
    ]
    out = ok[cols].sort_values(["imgsz", "width", "backend", "batch"]).reset_index(drop=True)
    best = out.groupby(["imgsz", "width", "backend"])["img_per_s"].transform("max")
    return out.assign(frac_of_best=out["img_per_s"] / best)


def saturation(table, frac: float):
    """Per (imgsz, width, backend): best img/s and its batch, and the smallest batch reaching
    ``frac`` of it (the knee: more batch buys little throughput but costs latency; the share
    is the saturation rule's threshold, :data:`yolo_sm.topics.batch.rules.SATURATION_PCT`)."""
    rows = []
    for key, g in table.groupby(["imgsz", "width", "backend"]):
        g = g.sort_values("batch")
        best = g.loc[g["img_per_s"].idxmax()]
        knee = g[g["img_per_s"] >= frac * best["img_per_s"]].iloc[0]
        rows.append(
            dict(
                zip(("imgsz", "width", "backend"), key, strict=True),
                best_img_per_s=best["img_per_s"],
                best_batch=int(best["batch"]),
                knee_batch=int(knee["batch"]),
                knee_img_per_s=knee["img_per_s"],
                knee_ms=knee["median_ms"],
                b1_img_per_s=g["img_per_s"].iloc[0] if g["batch"].iloc[0] == 1 else math.nan,
            )
        )
    out = pd.DataFrame(rows)
    out["gain_b1_to_best"] = out["best_img_per_s"] / out["b1_img_per_s"]
    return out


def graph_speedup(table):
    """Per (imgsz, width, batch): eager latency over CUDA-graph latency (above 1: the graph is
    faster), both measured in the same sweep."""
    p = table.pivot_table(
        index=["imgsz", "width", "batch"], columns="backend", values="median_ms"
    ).reset_index()
    p.columns.name = None
    for be in ("eager", "cudagraph"):  # a root without one of them: NaN speed-ups
        if be not in p:
            p[be] = math.nan
    return p.assign(speedup=p["eager"] / p["cudagraph"])


# ---- notebook 03: SM coverage (Nsight Compute) -------------------------------------------------


def ncu_coverage(ncu):
    """Per config of a Nsight Compute table: kernels, kernel time, median waves per SM, the
    fraction of kernels and of kernel time in launches under one wave (they cannot reach every
    SM, whatever their occupancy), and time-weighted theoretical / achieved occupancy."""

    d = with_config(ncu).assign(
        _under=lambda x: (x["waves_per_sm"] < 1).astype(float),
        _under_t=lambda x: x["duration_us"].where(x["waves_per_sm"] < 1, 0.0),
    )
    tw = time_weighted(d, ["config", "batch"])
    agg = d.groupby("config").agg(
        median_waves=("waves_per_sm", "median"),
        kernels_under_1_wave=("_under", "mean"),
        _ut=("_under_t", "sum"),
    )
    out = tw.merge(agg.reset_index(), on="config")
    out["time_under_1_wave"] = out.pop("_ut") / out["time_us"]
    out["achieved_over_theoretical"] = (
        out["achieved_occupancy_tw_pct"] / out["theoretical_occupancy_tw_pct"]
    )
    return out.sort_values("batch").reset_index(drop=True)


# ---- notebook 03: memory per batch -------------------------------------------------------------


def memory_fit(table, value: str = "peak_mem_bytes"):
    """Per (imgsz, width, backend): least-squares line ``value = intercept + slope x batch`` over
    the ok batches; slope is the memory per extra image, intercept the batch-independent part
    (weights, workspaces, allocator pools). With R² and the batches used.

    ``counts_activations`` is False for CUDA graphs measured without ``graph_pool_bytes``:
    their activations are allocated in the graph's private pool during capture (inside the
    build) and freed there, so the peak of ``max_memory_allocated`` over the replays holds only
    what stays allocated (weights, the static input and output), not the pool the graph keeps
    reserved. Where a row has ``graph_pool_bytes``, the pool is added to its peak; a group that
    mixes rows with and without it (a sweep resumed across code versions) is fitted on the
    rows with it when there are two or more, else on the others. A ``compile`` backend in
    reduce-overhead mode also keeps its activations in graph pools, which this does not see."""
    import numpy as np

    rows = []
    table = table.copy()
    if "graph_pool_bytes" in table:
        has_pool = table["graph_pool_bytes"].notna()
        # a graph's footprint: what stays allocated plus its private pool, where measured
        table.loc[has_pool, value] = table[value] + table["graph_pool_bytes"]
    else:
        has_pool = pd.Series(False, index=table.index)
    for key, g in table.dropna(subset=[value]).groupby(["imgsz", "width", "backend"]):
        counts = True
        if key[2] == "cudagraph":
            # a resumed sweep can mix rows with and without the pool: fit one kind only
            pooled = has_pool[g.index]
            counts = bool(pooled.sum() >= 2)
            g = g[pooled] if counts else g[~pooled]
            if len(g) < 2:
                continue
        b, m = g["batch"].to_numpy(float), g[value].to_numpy(float)
        slope, intercept = np.polyfit(b, m, 1)
        resid = m - (intercept + slope * b)
        ss = ((m - m.mean()) ** 2).sum()
        rows.append(
            dict(
                zip(("imgsz", "width", "backend"), key, strict=True),
                per_image_bytes=slope,
                intercept_bytes=intercept,
                r2=1 - (resid**2).sum() / ss if ss > 0 else math.nan,
                batches=len(g),
                max_batch=int(b.max()),
                peak_at_max_batch_bytes=float(m[b.argmax()]),
                counts_activations=counts,
            )
        )
    return pd.DataFrame(rows)


def graph_memory(fit):
    """Eager against CUDA graph per width, from a :func:`memory_fit` of a sweep whose graph
    rows carry ``graph_pool_bytes`` (so both lines count the activations): per-image MB and
    intercept MB of each backend, the graph's over eager's, and the footprint of each at the
    largest batch both measured. Widths whose graph line does not count the activations are
    left out; empty when none does."""
    keys = ["imgsz", "width"]
    e = fit[fit["backend"] == "eager"].set_index(keys)
    g = fit[(fit["backend"] == "cudagraph") & fit["counts_activations"]].set_index(keys)
    both = e.index.intersection(g.index)  # empty: an empty table with the same columns
    e, g = e.loc[both], g.loc[both]
    out = pd.DataFrame(
        {
            "eager_per_image_MB": e["per_image_bytes"] / 1e6,
            "graph_per_image_MB": g["per_image_bytes"] / 1e6,
            "per_image_ratio": g["per_image_bytes"] / e["per_image_bytes"],
            "eager_intercept_MB": e["intercept_bytes"] / 1e6,
            "graph_intercept_MB": g["intercept_bytes"] / 1e6,
            "max_batch": e["max_batch"].combine(g["max_batch"], min),
            "eager_peak_at_max_GB": e["peak_at_max_batch_bytes"] / 1e9,
            "graph_footprint_at_max_GB": g["peak_at_max_batch_bytes"] / 1e9,
        }
    )
    out["footprint_ratio_at_max"] = out["graph_footprint_at_max_GB"] / out["eager_peak_at_max_GB"]
    return out.reset_index().sort_values(keys).reset_index(drop=True)


def memory_budget(fit, gpu_memory_bytes: float, frac: float = MEMORY_BUDGET):
    """A :func:`memory_fit` with the largest batch whose fitted line stays within ``frac`` of
    the GPU's memory (``fitted_safe_batch = floor((frac x memory - intercept) / slope)``, an
    extrapolation past the measured batches) and the measured peak at the largest batch as a
    share of the memory (``peak_at_max_batch_pct``)."""
    budget = frac * gpu_memory_bytes
    out = fit.assign(budget_frac=frac)
    out["fitted_safe_batch"] = ((budget - out["intercept_bytes"]) / out["per_image_bytes"]).map(
        math.floor
    )
    out["peak_at_max_batch_pct"] = 100 * out["peak_at_max_batch_bytes"] / gpu_memory_bytes
    return out


def memory_table(budget):
    """A :func:`memory_budget` (or a :func:`memory_fit`) in MB, the columns a reader needs."""
    cols = ["imgsz", "width", "backend", "counts_activations", "per_image_MB", "intercept_MB"]
    cols += ["r2", "max_batch", "peak_at_max_batch_pct", "fitted_safe_batch"]
    out = budget.assign(
        per_image_MB=budget["per_image_bytes"] / 1e6, intercept_MB=budget["intercept_bytes"] / 1e6
    )
    return out[[c for c in cols if c in out]]


def build_vs_timed(table):
    """Per (imgsz, width, backend, batch): peak memory while the engine was built (cuDNN
    autotuning tries algorithms with their own workspaces) against the peak of the timed
    forwards; ``build_over_timed`` above 1 means building needs more than running."""
    cols = ["imgsz", "width", "backend", "batch", "peak_mem_bytes", "build_peak_mem_bytes"]
    d = table.dropna(subset=cols[-2:])[cols]
    return d.assign(build_over_timed=d["build_peak_mem_bytes"] / d["peak_mem_bytes"])


# ---- facts --------------------------------------------------------------------------------------


def nearest(values, target: float) -> float:
    """The value of ``values`` nearest to ``target`` (the reference width of a grid)."""
    values = sorted(set(values))
    return min(values, key=lambda v: (abs(v - target), v))


def ref_imgsz(table) -> int:
    """:data:`REF_IMGSZ` where ``table`` holds it, else its most measured image size (the
    smallest of a tie)."""
    sizes = table["imgsz"].value_counts()
    if REF_IMGSZ in sizes.index or sizes.empty:
        return REF_IMGSZ
    return int(min(sizes.index[sizes == sizes.max()]))


def _load(root: DataRoot, name: str):
    return root.load(name) if name and root.has(name) else None


def sweep_facts(table, gpu_memory_bytes: float = math.nan, datasets=()) -> list[dict]:
    """Facts of a :func:`batch_table` at its reference image size (:func:`ref_imgsz`; 1280 px
    beside 640 px where present): batching gain per backend, share of the best img/s at batch 8
    for the narrowest and widest model, the CUDA-graph speed-up at batch 1 and from batch 32,
    the memory lines of :func:`memory_facts`, and the build peak against the timed peak."""
    ds = tuple(datasets)
    out = []
    size = ref_imgsz(table)
    t = table[table["imgsz"] == size]
    if t.empty:
        return out
    w_ref = nearest(t["width"], REF_WIDTH)
    where = f"{size} px, width {w_ref:g}"
    for (be,), g in t[t["width"] == w_ref].groupby(["backend"]):
        g = g.sort_values("batch")
        if g["batch"].iloc[0] == 1:
            gain = g["img_per_s"].max() / g["img_per_s"].iloc[0]
            out.append(fact("batch_gain_b1_to_best", gain, "x", scope=be, datasets=ds, note=where))
    eager = t[t["backend"] == "eager"]
    if eager["width"].nunique() > 1:  # narrowest and widest: two widths, not one read twice
        for scope, w in (("narrowest", eager["width"].min()), ("widest", eager["width"].max())):
            g = eager[(eager["width"] == w) & (eager["batch"] == 8)]
            if len(g):
                out.append(
                    fact(
                        "batch_frac_of_best_at_b8",
                        100 * g["frac_of_best"].iloc[0],
                        "%",
                        scope=scope,
                        datasets=ds,
                        note=f"eager, {size} px, width {w:g}",
                    )
                )
    if {"eager", "cudagraph"} <= set(t["backend"]):
        sp = graph_speedup(t).dropna(subset=["speedup"])
        b1, big = sp[sp["batch"] == 1], sp[sp["batch"] >= 32]
        if len(b1):
            out.append(
                fact(
                    "batch_graph_speedup_b1_min",
                    b1["speedup"].min(),
                    "x",
                    datasets=ds,
                    note=f"eager / graph latency at batch 1, lowest over widths, {size} px",
                )
            )
        if len(big):
            out.append(
                fact(
                    "batch_graph_speedup_from_b32_max",
                    big["speedup"].max(),
                    "x",
                    datasets=ds,
                    note=f"eager / graph latency from batch 32, highest, {size} px",
                )
            )
    out += memory_facts(table, gpu_memory_bytes, ds)
    if "build_peak_mem_bytes" in table and "peak_mem_bytes" in table:
        b = build_vs_timed(table)
        if len(b):
            out.append(
                fact(
                    "batch_build_above_timed_pct",
                    100 * (b["build_over_timed"] > 1).mean(),
                    "%",
                    datasets=ds,
                    note="points whose build peak exceeds their timed peak",
                )
            )
    return out


def memory_facts(table, gpu_memory_bytes: float, datasets=()) -> list[dict]:
    """Memory facts of a :func:`batch_table` from its eager lines (:func:`memory_fit`), in GB
    (10^9 bytes): per image at the reference width (``batch_memory_per_image_gb``) and its range
    over widths, the batch-independent part, the fit's worst R², the GPU's memory, the largest
    batch whose fitted line stays within :data:`MEMORY_BUDGET` of it
    (``batch_fit_largest_images``), the largest measured batch, the peak at each width's best
    batch as a share of the memory (highest over widths), and at 1280 px the per-image memory
    over the 640 px one."""
    ds = tuple(datasets)
    if "peak_mem_bytes" not in table or table["peak_mem_bytes"].notna().sum() < 2:
        return []
    fit = memory_fit(table)
    if fit.empty:
        return []
    size = ref_imgsz(table)
    e = fit[(fit["imgsz"] == size) & (fit["backend"] == "eager")]
    if e.empty:
        return []
    w_ref = nearest(e["width"], REF_WIDTH)
    r = e[e["width"] == w_ref].iloc[0]
    where = f"eager, {size} px, width {w_ref:g}"
    out = [
        fact("batch_memory_per_image_gb", r.per_image_bytes / 1e9, "GB", datasets=ds, note=where),
        fact(
            "batch_memory_per_image_gb_min",
            e["per_image_bytes"].min() / 1e9,
            "GB",
            datasets=ds,
            note=f"eager, {size} px, lowest over widths",
        ),
        fact(
            "batch_memory_per_image_gb_max",
            e["per_image_bytes"].max() / 1e9,
            "GB",
            datasets=ds,
            note=f"eager, {size} px, highest over widths",
        ),
        fact("batch_memory_intercept_gb", r.intercept_bytes / 1e9, "GB", datasets=ds, note=where),
        fact(
            "batch_memory_fit_r2_min",
            e["r2"].min(),
            "",
            datasets=ds,
            note=f"eager, {size} px, lowest R² of the straight lines over widths",
        ),
        fact("batch_largest_measured", e["max_batch"].max(), "images", datasets=ds),
    ]
    if gpu_memory_bytes == gpu_memory_bytes and gpu_memory_bytes > 0:
        budget = memory_budget(e, gpu_memory_bytes).set_index("width")
        out += [
            fact(
                "batch_gpu_memory_gb",
                gpu_memory_bytes / 1e9,
                "GB",
                datasets=ds,
                note="prov_gpu_memory_bytes",
            ),
            fact(
                "batch_fit_largest_images",
                budget.loc[w_ref, "fitted_safe_batch"],
                "images",
                datasets=ds,
                note=f"{MEMORY_BUDGET:.0%} of GPU memory spent on the fitted line, {where}",
            ),
        ]
        ok = table[(table["imgsz"] == size) & (table["backend"] == "eager")]
        ok = ok.dropna(subset=["peak_mem_bytes"])
        if len(ok):
            best = ok.loc[ok.groupby("width")["img_per_s"].idxmax()]
            out.append(
                fact(
                    "batch_peak_mem_at_best_pct",
                    100 * best["peak_mem_bytes"].max() / gpu_memory_bytes,
                    "%",
                    datasets=ds,
                    note=f"peak at each width's best batch, highest, eager, {size} px",
                )
            )
    # at twice the side (1280 px beside 640 px): four times the pixels
    big = fit[(fit["imgsz"] == 2 * size) & (fit["backend"] == "eager") & (size == REF_IMGSZ)]
    big = big[big["width"] == w_ref]
    if len(big):
        out.append(
            fact(
                "batch_memory_1280_over_640",
                big["per_image_bytes"].iloc[0] / r.per_image_bytes,
                "x",
                datasets=ds,
                note=f"eager, width {w_ref:g}, per-image memory",
            )
        )
    return out


def coverage_facts(coverage, datasets=()) -> list[dict]:
    """Facts of an :func:`ncu_coverage` table: the share of kernels under one wave at the
    smallest profiled batch, and the change of time-weighted achieved and theoretical occupancy
    (percentage points) from the smallest to the largest batch."""
    ds = tuple(datasets)
    if coverage.empty:
        return []
    c = coverage.sort_values("batch")
    lo, hi = c.iloc[0], c.iloc[-1]
    out = []
    if len(c) > 1:
        span = f"batch {int(lo.batch)} to {int(hi.batch)}"
        out += [
            fact(
                "batch_ncu_achieved_occupancy_rise",
                hi.achieved_occupancy_tw_pct - lo.achieved_occupancy_tw_pct,
                "pp",
                datasets=ds,
                note=span,
            ),
            fact(
                "batch_ncu_theoretical_occupancy_change",
                abs(hi.theoretical_occupancy_tw_pct - lo.theoretical_occupancy_tw_pct),
                "pp",
                datasets=ds,
                note=span,
            ),
        ]
    return out


def gpm_facts(medians, datasets=()) -> list[dict]:
    """``batch_gpm_sm_util_ratio``: median GPM SM utilisation at the largest batch over that
    at the smallest (a :func:`yolo_sm.analyse.gpm.gpm_medians` table of one width)."""
    m = medians.sort_values("batch")
    if len(m) < 2 or "sm_util_pct" not in m or not m["sm_util_pct"].iloc[0] > 0:
        return []
    lo, hi = m.iloc[0], m.iloc[-1]
    return [
        fact(
            "batch_gpm_sm_util_ratio",
            hi.sm_util_pct / lo.sm_util_pct,
            "x",
            datasets=tuple(datasets),
            note=f"batch {int(hi.batch)} over batch {int(lo.batch)}",
        )
    ]


def pool_facts(sweep, pooled, datasets=()) -> list[dict]:
    """Facts of a sweep measured again (``pooled``: the same points, graph rows with their
    private pool): a CUDA graph's footprint over eager's peak at the largest batch (lowest over
    widths), the per-image ratio (median), and how far the re-measured img/s moved (largest
    |new / first - 1| in percent) where the GPU sets the pace (CUDA graph) and, reported
    only, where the host's launches do (eager at small batch, over its same-process graph),
    the largest change of the GPU's busy time per forward of the host-bound points (where both
    tables measured it), with the points compared."""
    ds = tuple(datasets)
    out = []
    gm = graph_memory(memory_fit(batch_table(pooled))) if "peak_mem_bytes" in pooled else None
    if gm is not None and len(gm):
        out += [
            fact(
                "batch_graph_footprint_ratio_min",
                gm["footprint_ratio_at_max"].min(),
                "x",
                datasets=ds,
                note="graph (pool counted) over eager peak at the largest batch",
            ),
            fact(
                "batch_graph_per_image_ratio_median",
                gm["per_image_ratio"].median(),
                "x",
                datasets=ds,
                note="graph over eager memory per extra image",
            ),
        ]
    cmp = compare(sweep, pooled)
    if len(cmp):
        dev = 100 * (cmp["ratio"] - 1).abs()
        busy = 100 * (cmp["gpu_busy_ratio"] - 1).abs()
        host = cmp["host_bound"].astype(bool)
        out.append(fact("batch_remeasure_points", len(cmp), "points", datasets=ds))
        for key, d, sel in (
            ("batch_remeasure_graph_max_dev_pct", dev, cmp["backend"] == "cudagraph"),
            # reported (same-process ratio), never a rule: the host's pace
            ("batch_remeasure_launch_bound_max_dev_pct", dev, cmp["launch_bound"]),
            ("batch_remeasure_host_bound_gpu_busy_max_dev_pct", busy, host & busy.notna()),
        ):
            if sel.any():
                out.append(fact(key, d[sel].max(), "%", datasets=ds))
    return out


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    batch_build_above_timed_pct batch_frac_of_best_at_b8 batch_gain_b1_to_best
    batch_gpm_sm_util_ratio batch_graph_footprint_ratio_min batch_graph_speedup_b1_min
    batch_graph_speedup_from_b32_max batch_memory_1280_over_640 batch_memory_fit_r2_min
    batch_ncu_achieved_occupancy_rise
    batch_ncu_theoretical_occupancy_change batch_peak_mem_at_best_pct
    batch_remeasure_graph_max_dev_pct batch_remeasure_host_bound_gpu_busy_max_dev_pct
    """.split()
)


def facts(
    root: DataRoot,
    *,
    sweep: str = SWEEP,
    sweep_1280: str = SWEEP_1280,
    pool_sweep: str = POOL_SWEEP,
    ncu: str = NCU,
    gpm: str = GPM,
) -> pd.DataFrame:
    """The facts of notebook 03 read off ``root`` (datasets by short name); a dataset the root
    lacks leaves its facts out. Keys: ``batch_gain_b1_to_best`` (scope eager / cudagraph),
    ``batch_frac_of_best_at_b8`` (scope narrowest / widest), ``batch_graph_speedup_b1_min``,
    ``batch_graph_speedup_from_b32_max``, the memory facts of :func:`memory_facts`
    (``batch_memory_per_image_gb``, ``batch_gpu_memory_gb``, ``batch_fit_largest_images``, ...),
    ``batch_build_above_timed_pct``, the Nsight Compute facts of :func:`coverage_facts`, the GPM
    fact of :func:`gpm_facts` and the re-measure facts of :func:`pool_facts`."""
    rows = []
    s = _load(root, sweep)
    if s is not None:
        s1280 = _load(root, sweep_1280)
        names = [sweep] + ([sweep_1280] if s1280 is not None else [])
        both = s if s1280 is None else pd.concat([s, s1280], ignore_index=True)
        mem = (
            float(s["prov_gpu_memory_bytes"].dropna().iloc[0])
            if "prov_gpu_memory_bytes" in s and s["prov_gpu_memory_bytes"].notna().any()
            else math.nan
        )
        rows += sweep_facts(batch_table(both), mem, names)
        p = _load(root, pool_sweep)
        if p is not None:
            same = p[p["precision"].isin(s["precision"].unique())]
            rows += pool_facts(s, same, [sweep, pool_sweep])
    n = _load(root, ncu)
    if n is not None:
        rows += coverage_facts(ncu_coverage(n), [ncu])
    g = _load(root, gpm)
    if g is not None:
        rows += gpm_facts(gpm_medians(g), [gpm])
    return facts_table(rows)

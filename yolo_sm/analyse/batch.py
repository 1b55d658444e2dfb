"""Batch size and GPU timelines: data shaping and figures for notebooks 03 and 05.

Notebook 03 (batch sweep): throughput, latency and saturation per batch from a sweep table, CUDA
graph speed-up, SM coverage per batch from Nsight Compute, GPM utilisation per batch, and a
memory rule checked against measured peak memory. Notebook 05 (SM timeline): GPM time series with
the configs shaded, per-config medians, and launch gaps in a Kineto trace. Every function takes
tables and returns a table or a plotly figure; none shows anything.
"""

from __future__ import annotations

import math

from yolo_sm.analyse.gpm import SUMMARY_METRICS, overhead_pct, run_medians, wide
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.contract.labels import parse_config as _parse
from yolo_sm.contract.labels import with_config

GPM_METRICS = SUMMARY_METRICS


def parse_config(label: str) -> dict:
    """:func:`yolo_sm.collect.profiling.target.parse_config`, lenient: NaN / None for another
    form."""
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
            "noisy",
        )
        if c in ok
    ]
    out = ok[cols].sort_values(["imgsz", "width", "backend", "batch"]).reset_index(drop=True)
    best = out.groupby(["imgsz", "width", "backend"])["img_per_s"].transform("max")
    return out.assign(frac_of_best=out["img_per_s"] / best)


def saturation(table, frac: float = 0.9):
    """Per (imgsz, width, backend): best img/s and its batch, and the smallest batch reaching
    ``frac`` of it (the knee: more batch buys little throughput but costs latency)."""
    import pandas as pd

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
    return p.assign(speedup=p["eager"] / p["cudagraph"])


# ---- notebook 03: SM coverage (Nsight Compute) and GPM per batch -------------------------------


def ncu_coverage(ncu):
    """Per config of a Nsight Compute table: kernels, kernel time, median waves per SM, the
    fraction of kernels and of kernel time in launches under one wave (they cannot fill the 132
    SMs even at full occupancy), and time-weighted theoretical / achieved occupancy."""

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


def gpm_wide(gpm):
    """GPM tidy rows -> one row per window, the metrics as columns, config parsed, ``t0_s`` the
    window's start (provenance columns dropped)."""

    g = gpm[[c for c in gpm.columns if not c.startswith("prov_")]]
    w = wide(g).sort_values("t_s").reset_index(drop=True)
    w["config"] = w["config"].fillna("")
    w = with_config(w)
    return w.assign(t0_s=w["t_s"] - w["window_s"])


def gpm_overhead_table(overhead):
    """Per config of a ``gpm_overhead`` table: paired rounds, sampling rate, median img/s without
    the sampler, and the throughput lost with it on (``profiling.suite.overhead_pct``: median
    over rounds of 1 - with / without; negative = within noise)."""
    import pandas as pd

    rows = {
        config: {
            "rounds": g["round"].nunique(),
            "hz": g.hz.iloc[0],
            "img_per_s_without": g[~g.sampler].img_per_s.median(),
            "throughput_lost_pct": overhead_pct(g),
        }
        for config, g in overhead.groupby("config")
    }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("config")


def gpm_medians(gpm):
    """Median of each GPM metric over the run windows of each config, windows that straddle a
    marker change left out; with the window count, sorted by width then batch."""

    med = run_medians(gpm[[c for c in gpm.columns if not c.startswith("prov_")]])
    metrics = [m for m in GPM_METRICS if m in med]
    out = with_config(med)[["config", "width", "batch", *metrics, "windows"]]
    out = out.sort_values(["width", "batch"]).reset_index(drop=True)
    return out.astype({"batch": int})


# ---- notebook 03: memory rule -------------------------------------------------------------------


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
    import pandas as pd

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
    import pandas as pd

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


def memory_rule(fit, gpu_memory_bytes: float, claim_per_image_bytes: float, frac: float = 0.7):
    """The rule ``safe batch = floor(frac x GPU memory / per-image memory)`` with the claimed
    per-image memory, against the same budget spent with the fitted line
    (``floor((frac x memory - intercept) / slope)``), and the claim's per-image figure over the
    fitted one."""
    budget = frac * gpu_memory_bytes
    out = fit.assign(budget_frac=frac)
    out["claim_safe_batch"] = math.floor(budget / claim_per_image_bytes)
    out["fitted_safe_batch"] = ((budget - out["intercept_bytes"]) / out["per_image_bytes"]).map(
        math.floor
    )
    out["claim_over_fitted_per_image"] = claim_per_image_bytes / out["per_image_bytes"]
    out["claim_bytes_at_max_batch"] = claim_per_image_bytes * out["max_batch"]
    out["measured_over_claim_at_max_batch"] = (
        out["peak_at_max_batch_bytes"] / out["claim_bytes_at_max_batch"]
    )
    return out


def memory_table(rule):
    """The memory-rule table in MB, the columns a reader needs."""
    cols = ["imgsz", "width", "backend", "counts_activations", "per_image_MB", "intercept_MB"]
    cols += ["r2", "max_batch"]
    cols += [c for c in ("claim_safe_batch", "fitted_safe_batch", "claim_over_fitted_per_image")]
    out = rule.assign(
        per_image_MB=rule["per_image_bytes"] / 1e6, intercept_MB=rule["intercept_bytes"] / 1e6
    )
    return out[[c for c in cols if c in out]]


def build_vs_timed(table):
    """Per (imgsz, width, backend, batch): peak memory while the engine was built (cuDNN
    autotuning tries algorithms with their own workspaces) against the peak of the timed
    forwards; ``build_over_timed`` above 1 means building needs more than running."""
    cols = ["imgsz", "width", "backend", "batch", "peak_mem_bytes", "build_peak_mem_bytes"]
    d = table.dropna(subset=cols[-2:])[cols]
    return d.assign(build_over_timed=d["build_peak_mem_bytes"] / d["peak_mem_bytes"])


# ---- notebook 05: GPM timelines -----------------------------------------------------------------


def run_spans(w):
    """Per config's run phase in a :func:`gpm_wide` frame: start and end time (first window's
    start, last window's end)."""
    run = w[(w["phase"] == "run") & (w["config"] != "")]
    out = run.groupby("config").agg(t0_s=("t0_s", "min"), t1_s=("t_s", "max"))
    return out.reset_index().sort_values("t0_s").reset_index(drop=True)


# ---- notebook 05: launch gaps (Kineto) ---------------------------------------------------------


def kernel_gaps(trace):
    """Per kernel of a Kineto table, sorted by start within (config, iteration): ``gap_us`` from
    the end of the previous kernel to this kernel's start (NaN for the first)."""
    d = trace.sort_values(["config", "iteration", "start_us"]).copy()
    end = d["start_us"] + d["duration_us"]
    prev_end = end.groupby([d["config"], d["iteration"]]).shift()
    # a kernel overlapping the previous one (another stream) leaves no gap
    d["gap_us"] = (d["start_us"] - prev_end).clip(lower=0)
    return d


def launch_gaps(trace):
    """Per (config, iteration): kernels, summed kernel time, wall span of the forward on the
    GPU (start of the first kernel to the end of the last), GPU idle fraction of that span, and
    the median and largest gap between kernels."""
    d = kernel_gaps(trace)
    g = d.groupby(["config", "iteration"])
    out = g.agg(
        kernels=("duration_us", "size"),
        kernel_us=("duration_us", "sum"),
        first_start=("start_us", "min"),
        median_gap_us=("gap_us", "median"),
        max_gap_us=("gap_us", "max"),
    )
    out["span_us"] = (d["start_us"] + d["duration_us"]).groupby(
        [d["config"], d["iteration"]]
    ).max() - out.pop("first_start")
    out["idle_frac"] = 1 - out["kernel_us"] / out["span_us"]
    out = with_config(out.reset_index())
    return out.sort_values(["batch", "iteration"]).reset_index(drop=True)


def launch_vs_sweep(gaps, table, width: float | None = None):
    """Per batch of the traced configs: mean kernel time and span per forward in the trace next to
    the sweep's eager and CUDA-graph latency at the same width and batch; ``sweep_idle_frac`` is
    1 - kernel time / eager latency (the GPU's idle share of an un-profiled eager forward, if the
    kernels run as long as under the profiler)."""
    per = gaps.groupby(["width", "batch"])[["kernels", "kernel_us", "span_us", "idle_frac"]]
    per = per.mean().reset_index()
    if width is not None:
        per = per[per["width"] == width]
    sw = graph_speedup(table[table["imgsz"] == 640]) if "imgsz" in table else graph_speedup(table)
    out = per.merge(sw.drop(columns="imgsz"), on=["width", "batch"], how="left")
    out = out.rename(
        columns={
            "kernel_us": "trace_kernel_us",
            "span_us": "trace_span_us",
            "idle_frac": "trace_idle_frac",
            "eager": "sweep_eager_ms",
            "cudagraph": "sweep_graph_ms",
            "speedup": "graph_speedup",
        }
    )
    out["sweep_idle_frac"] = 1 - out["trace_kernel_us"] / (1000 * out["sweep_eager_ms"])
    out["graph_over_kernel_time"] = 1000 * out["sweep_graph_ms"] / out["trace_kernel_us"]
    return out


# ---- findings text, built from the tables ------------------------------------------------------

"""GPU timelines: GPM windows over time, per-config spans, launch gaps in a Kineto trace
(notebook 05).

GPM rows become one row per window (:func:`yolo_sm.analyse.gpm.gpm_wide`) with each config's
run span; a Kineto trace gives the gaps between the kernels of one eager forward, set beside
the sweep's eager and CUDA-graph latency. :func:`facts` reads the numbers the rules of
:mod:`yolo_sm.topics.timeline.rules` compare. Nothing here judges.
"""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.gpm import gpm_medians, gpm_overhead_table, gpm_wide
from yolo_sm.analyse.hostbound import busy_time
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import with_config
from yolo_sm.topics.batch.analyse import (
    REF_WIDTH,
    SWEEP,
    batch_table,
    graph_speedup,
    nearest,
    ref_imgsz,
)

# the datasets notebook 05 reads (short names in a root)
GPM_BATCH = "gpm_batch_w1"  # one width, batch 1-128
GPM_WIDTH = "gpm_width_b16"  # widths 0.25-2.0, one batch
TRACE = "trace_batch_w1"  # Kineto kernels, one width, a few batches, two forwards each
GPM_OVERHEAD = "gpm_overhead"  # img/s with and without the GPM sampler, paired rounds


def run_spans(w):
    """Per config's run phase in a :func:`yolo_sm.analyse.gpm.gpm_wide` frame: start and end
    time (first window's start, last window's end)."""
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
    the sweep's eager and CUDA-graph latency at the same width and batch. ``sweep_idle_frac`` is
    the GPU's idle share of an un-profiled eager forward: 1 - the sweep's own GPU busy time per
    forward over its eager latency, both from the same process, where the sweep records
    ``gpu_busy_ms``; else 1 - the trace's kernel time over the eager latency (another run: if
    the kernels run as long as under the profiler). ``idle_from`` says which;
    ``graph_over_kernel_time`` is the graph replay's latency over the same busy time."""
    per = gaps.groupby(["width", "batch"])[["kernels", "kernel_us", "span_us", "idle_frac"]]
    per = per.mean().reset_index()
    if width is not None:
        per = per[per["width"] == width]
    t = table[table["imgsz"] == ref_imgsz(table)] if "imgsz" in table else table
    sw = graph_speedup(t)
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
    if "gpu_busy_ms" in t:
        busy = t.pivot_table(index=["width", "batch"], columns="backend", values="gpu_busy_ms")
        keys = list(zip(out["width"], out["batch"], strict=True))
        for be, col in (("eager", "sweep_eager_busy_ms"), ("cudagraph", "sweep_graph_busy_ms")):
            has = be in busy and isinstance(busy.index, pd.MultiIndex)
            out[col] = busy[be].reindex(keys).to_numpy() if has else float("nan")
    own = out.get("sweep_eager_busy_ms", pd.Series(float("nan"), index=out.index))
    busy_ms, out["idle_from"] = busy_time(own, out["trace_kernel_us"] / 1000)
    graph_busy = out.get("sweep_graph_busy_ms", pd.Series(float("nan"), index=out.index))
    graph_busy = graph_busy.where(graph_busy.notna(), busy_ms)
    out["sweep_idle_frac"] = 1 - busy_ms / out["sweep_eager_ms"]
    out["graph_over_kernel_time"] = out["sweep_graph_ms"] / graph_busy
    return out


# ---- facts --------------------------------------------------------------------------------------


def gpm_window_facts(gpm, sweep_table=None, datasets=()) -> list[dict]:
    """``timeline_gpm_window_ms``: the median GPM window; ``timeline_forwards_per_gpm_window``:
    how many of the fastest batch-1 forwards of the sweep (any backend, reference width) fit
    in one window."""
    ds = tuple(datasets)
    w = gpm_wide(gpm)
    if w.empty:
        return []
    ms = 1000 * float(w["window_s"].median())
    out = [fact("timeline_gpm_window_ms", ms, "ms", datasets=ds[:1])]
    if sweep_table is not None:
        t = sweep_table[sweep_table["imgsz"] == ref_imgsz(sweep_table)]
        t = t[t["batch"] == 1]
        if len(t):
            w_ref = nearest(t["width"], REF_WIDTH)
            fwd = t[t["width"] == w_ref]["median_ms"].min()
            out.append(
                fact(
                    "timeline_forwards_per_gpm_window",
                    ms / fwd,
                    "x",
                    datasets=ds,
                    note=f"fastest batch-1 forward at width {w_ref:g}: {fwd:.3g} ms",
                )
            )
    return out


def ratio_fact(key: str, medians, metric: str, by: str, datasets=()) -> list[dict]:
    """A GPM median ``metric`` at the largest ``by`` over that at the smallest."""
    m = medians.sort_values(by)
    if len(m) < 2 or metric not in m or not m[metric].iloc[0] > 0:
        return []
    lo, hi = m.iloc[0], m.iloc[-1]
    return [
        fact(
            key,
            hi[metric] / lo[metric],
            "x",
            datasets=tuple(datasets),
            note=f"{by} {hi[by]:g} over {by} {lo[by]:g}",
        )
    ]


def gap_facts(trace, sweep_table=None, datasets=()) -> list[dict]:
    """Launch-gap facts: the GPU's idle share of a traced eager forward at the smallest and the
    largest traced batch (percent, mean over iterations), and with the sweep at the same width
    and batch 1 the idle share of an un-profiled eager forward and a CUDA-graph replay over the
    summed kernel time."""
    ds = tuple(datasets)
    gaps = launch_gaps(trace)
    if gaps.empty:
        return []
    per = gaps.groupby("batch")["idle_frac"].mean().sort_index()
    hi = int(per.index[-1])
    out = [
        # a batch-1 fact reads batch 1 only; "the largest batch" needs a smaller one beside it
        fact(
            "timeline_trace_idle_b1_pct",
            100 * per.get(1, math.nan),
            "%",
            datasets=ds[:1],
            note="batch 1, under the profiler",
        ),
        fact(
            "timeline_trace_idle_largest_pct",
            100 * per.iloc[-1] if len(per) > 1 else math.nan,
            "%",
            datasets=ds[:1],
            note=f"batch {hi}, under the profiler",
        ),
    ]
    if sweep_table is not None:
        width = nearest(gaps["width"], REF_WIDTH)
        lvs = launch_vs_sweep(gaps, sweep_table, width)
        lvs = lvs[lvs["batch"] == 1]
        r = lvs.iloc[0] if len(lvs) else None
        if r is not None and r.sweep_eager_ms == r.sweep_eager_ms:
            out.append(
                fact(
                    "timeline_sweep_idle_b1_pct",
                    100 * r.sweep_idle_frac,
                    "%",
                    datasets=ds,
                    note=f"batch {int(r.batch)}, width {width:g}: 1 - GPU busy / eager ms "
                    f"({r.idle_from})",
                )
            )
        if r is not None and r.sweep_graph_ms == r.sweep_graph_ms:
            out.append(
                fact(
                    "timeline_graph_over_kernel_time_b1",
                    r.graph_over_kernel_time,
                    "x",
                    datasets=ds,
                    note=f"batch {int(r.batch)}, width {width:g}",
                )
            )
    return out


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    timeline_forwards_per_gpm_window timeline_gpm_overhead_pct
    timeline_gpm_sm_occupancy_ratio_batch timeline_gpm_tensor_util_ratio_width
    timeline_graph_over_kernel_time_b1 timeline_sweep_idle_b1_pct timeline_trace_idle_b1_pct
    timeline_trace_idle_largest_pct
    """.split()
)


def facts(
    root: DataRoot,
    *,
    gpm_batch: str = GPM_BATCH,
    gpm_width: str = GPM_WIDTH,
    trace: str = TRACE,
    sweep: str = SWEEP,
    overhead: str = GPM_OVERHEAD,
) -> pd.DataFrame:
    """The facts of notebook 05 read off ``root`` (datasets by short name); a dataset the root
    lacks leaves its facts out. Keys: ``timeline_gpm_window_ms``,
    ``timeline_forwards_per_gpm_window``, ``timeline_gpm_sm_occupancy_ratio_batch``,
    ``timeline_gpm_tensor_util_ratio_width``, ``timeline_trace_idle_b1_pct``,
    ``timeline_trace_idle_largest_pct``, ``timeline_sweep_idle_b1_pct``,
    ``timeline_graph_over_kernel_time_b1``, ``timeline_gpm_overhead_pct`` (the largest
    throughput loss with the sampler on, over configs)."""
    rows = []
    has = root.has
    table = batch_table(root.load(sweep)) if has(sweep) else None
    sw = [sweep] if table is not None else []
    if has(gpm_batch):
        g = root.load(gpm_batch)
        rows += gpm_window_facts(g, table, [gpm_batch, *sw])
        rows += ratio_fact(
            "timeline_gpm_sm_occupancy_ratio_batch",
            gpm_medians(g),
            "sm_occupancy_pct",
            "batch",
            [gpm_batch],
        )
    if has(gpm_width):
        rows += ratio_fact(
            "timeline_gpm_tensor_util_ratio_width",
            gpm_medians(root.load(gpm_width)),
            "tensor_util_pct",
            "width",
            [gpm_width],
        )
    if has(trace):
        rows += gap_facts(root.load(trace), table, [trace, *sw])
    if has(overhead):
        t = gpm_overhead_table(root.load(overhead))
        if len(t):
            rows.append(
                fact(
                    "timeline_gpm_overhead_pct",
                    t["throughput_lost_pct"].max(),
                    "%",
                    datasets=(overhead,),
                    note="largest over configs; negative: within noise",
                )
            )
    return facts_table(rows)

"""SM timeline (notebook 05): GPM windows and run spans, the gaps between a traced eager
forward's kernels, and the traced forwards beside the sweep's latencies; :func:`facts`."""

from __future__ import annotations

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

# fmt: off

GPM_BATCH = "gpm_batch_w1"  # one width, batch 1-128
GPM_WIDTH = "gpm_width_b16"  # widths 0.25-2.0, batch 16
TRACE = "trace_batch_w1"  # Kineto kernels, one width, a few batches, two forwards each
GPM_OVERHEAD = "gpm_overhead"  # img/s with and without the GPM sampler, paired rounds


def run_spans(w):
    """Start and end time (s) of each config's run phase in a GPM wide frame."""
    run = w[(w.phase == "run") & (w.config != "")]
    out = run.groupby("config").agg(t0_s=("t0_s", "min"), t1_s=("t_s", "max"))
    return out.reset_index().sort_values("t0_s", ignore_index=True)


def kernel_gaps(trace):
    """Kineto rows in start order per (config, iteration) with ``gap_us`` since the
    previous kernel's end (0 where they overlap)."""
    d = trace.sort_values(["config", "iteration", "start_us"]).copy()
    prev_end = (d.start_us + d.duration_us).groupby([d.config, d.iteration]).shift()
    d["gap_us"] = (d.start_us - prev_end).clip(lower=0)
    return d


def launch_gaps(trace):
    """Per (config, iteration): kernels, kernel us, GPU span, ``idle_frac``, gaps."""
    d = kernel_gaps(trace).assign(end_us=lambda x: x.start_us + x.duration_us)
    out = d.groupby(["config", "iteration"]).agg(
        kernels=("duration_us", "size"), kernel_us=("duration_us", "sum"),
        first_start=("start_us", "min"), last_end=("end_us", "max"),
        median_gap_us=("gap_us", "median"), max_gap_us=("gap_us", "max"),
    )
    out["span_us"] = out.pop("last_end") - out.pop("first_start")
    out["idle_frac"] = 1 - out.kernel_us / out.span_us
    return with_config(out.reset_index()).sort_values(["batch", "iteration"], ignore_index=True)


def launch_vs_sweep(gaps, table, width: float | None = None):
    """Per traced (width, batch): trace span and kernel time beside the sweep's
    eager and graph latency; ``sweep_idle_frac`` from the sweep's own GPU busy time where recorded
    (else the trace's, ``idle_from``) and ``graph_over_kernel_time``."""
    per = gaps.groupby(["width", "batch"])[["kernels", "kernel_us", "span_us", "idle_frac"]]
    per = per.mean().reset_index()
    if width is not None:
        per = per[per.width == width]
    t = table[table.imgsz == ref_imgsz(table)]
    out = per.merge(graph_speedup(t).drop(columns="imgsz"), on=["width", "batch"], how="left")
    out = out.rename(
        columns={
            "kernel_us": "trace_kernel_us", "span_us": "trace_span_us",
            "idle_frac": "trace_idle_frac", "eager": "sweep_eager_ms",
            "cudagraph": "sweep_graph_ms", "speedup": "graph_speedup",
        }
    )
    busy = pd.DataFrame()
    if "gpu_busy_ms" in t:
        busy = t.pivot_table(index=["width", "batch"], columns="backend", values="gpu_busy_ms")
    at = pd.MultiIndex.from_frame(out[["width", "batch"]])
    busy = busy.reindex(columns=["eager", "cudagraph"]).reindex(at)
    out["sweep_eager_busy_ms"] = own = busy.eager.to_numpy()
    out["sweep_graph_busy_ms"] = graph_busy = busy.cudagraph.to_numpy()
    busy_ms, out["idle_from"] = busy_time(pd.Series(own, out.index), out.trace_kernel_us / 1000)
    out["sweep_idle_frac"] = 1 - busy_ms / out.sweep_eager_ms
    graph_busy = busy_ms.where(pd.isna(graph_busy), graph_busy)
    out["graph_over_kernel_time"] = out.sweep_graph_ms / graph_busy
    return out


def gpm_ratio(key: str, medians, metric: str, by: str, lo, datasets=()) -> list[dict]:
    """A GPM median ``metric`` at the largest ``by`` over that at ``lo`` (none without)."""
    m = medians.sort_values(by)
    base = m[m[by] == lo] if lo is not None else m.iloc[:1]
    if metric not in m or base.empty or not base[metric].iloc[0] > 0:
        return []
    hi, b = m.iloc[-1], base.iloc[0]
    if hi[by] <= b[by]:
        return []
    note = f"{by} {hi[by]:g} over {by} {b[by]:g}"
    return [fact(key, hi[metric] / b[metric], "x", datasets=tuple(datasets), note=note)]


def gap_facts(trace, table=None, datasets=()) -> list[dict]:
    """From the trace at the width nearest 1: the largest batch's idle share under the
    profiler; with the sweep, batch 1's un-profiled idle share and graph over kernel time."""
    ds, gaps = tuple(datasets), launch_gaps(trace)
    if gaps.empty:
        return []
    width = nearest(gaps.width, REF_WIDTH)
    per = gaps[gaps.width == width].groupby("batch").idle_frac.mean()
    out = []
    if len(per) > 1:
        note, idle = f"batch {per.index[-1]}, width {width:g}", 100 * per.iloc[-1]
        out.append(fact("timeline_trace_idle_largest_pct", idle, "%", datasets=ds[:1], note=note))
    lvs = launch_vs_sweep(gaps, table, width) if table is not None else gaps.iloc[:0]
    lvs = lvs[lvs.batch == 1] if len(lvs) else lvs
    if len(lvs):
        r, note = lvs.iloc[0], f"batch 1, width {width:g}"
        how = f"{note}: 1 - GPU busy / eager ms ({r.idle_from})"
        idle, graph = 100 * r.sweep_idle_frac, r.graph_over_kernel_time
        out += [
            fact("timeline_sweep_idle_b1_pct", idle, "%", datasets=ds, note=how),
            fact("timeline_graph_over_kernel_time_b1", graph, "x", datasets=ds, note=note),
        ]
    return out


#: the facts a rule reads
FACT_KEYS = frozenset(
    """
    timeline_forwards_per_gpm_window timeline_gpm_overhead_pct
    timeline_gpm_sm_occupancy_ratio_batch timeline_gpm_tensor_util_ratio_width
    timeline_graph_over_kernel_time_b1 timeline_sweep_idle_b1_pct timeline_trace_idle_largest_pct
    """.split()
)


def facts(
    root: DataRoot, *, gpm_batch=GPM_BATCH, gpm_width=GPM_WIDTH, trace=TRACE, sweep=SWEEP,
    overhead=GPM_OVERHEAD,
) -> pd.DataFrame:
    """The facts of notebook 05 (datasets by short name); a missing one leaves its facts out."""
    rows, has = [], (lambda n: bool(n) and root.has(n))
    table = batch_table(root.load(sweep)) if has(sweep) else None
    sw = [sweep] if table is not None else []
    if has(gpm_batch):
        g = root.load(gpm_batch)
        rows += gpm_ratio(
            "timeline_gpm_sm_occupancy_ratio_batch", gpm_medians(g), "sm_occupancy_pct", "batch", 1,
            [gpm_batch],
        )
        t = table[(table.imgsz == ref_imgsz(table)) & (table.batch == 1)] if sw else ()
        if len(t) and len(w := gpm_wide(g)):
            ms, wr = 1000 * float(w.window_s.median()), nearest(t.width, REF_WIDTH)
            fwd = t[t.width == wr].median_ms.min()
            note = f"{ms:.0f} ms window over the fastest batch-1 forward at width {wr:g}, "
            note, ds = note + f"{fwd:.3g} ms", (gpm_batch, sweep)
            key = "timeline_forwards_per_gpm_window"
            rows.append(fact(key, ms / fwd, "x", datasets=ds, note=note))
    if has(gpm_width):
        rows += gpm_ratio(
            "timeline_gpm_tensor_util_ratio_width", gpm_medians(root.load(gpm_width)),
            "tensor_util_pct", "width", None, [gpm_width],
        )
    if has(trace):
        rows += gap_facts(root.load(trace), table, [trace, *sw])
    if has(overhead) and len(t := gpm_overhead_table(root.load(overhead))):
        lost, ds = t.throughput_lost_pct.max(), (overhead,)
        note = "largest over configs"
        rows.append(fact("timeline_gpm_overhead_pct", lost, "%", datasets=ds, note=note))
    return facts_table(rows)

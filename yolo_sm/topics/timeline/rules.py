"""Notebook 05's rules."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.timeline.analyse import GPM_BATCH, GPM_OVERHEAD, GPM_WIDTH, SWEEP, TRACE

G = "05_sm_timeline"

# fmt: off
RULES: tuple[Rule, ...] = check_unique([
    Rule("timeline_gpm_coarse", "One GPM window spans at least 10 batch-1 forwards (width 1, "
         "640 px): GPM shows a workload's steady state, never a single forward",
         "timeline_forwards_per_gpm_window", ">=", 10.0, "x", partly=2.0,
         datasets=(GPM_BATCH, SWEEP), group=G),
    Rule("timeline_sm_occupancy_rises_with_batch", "GPM SM occupancy at the largest batch is at "
         "least 3x that at batch 1 (width 1)", "timeline_gpm_sm_occupancy_ratio_batch", ">=",
         3.0, "x", partly=1.5, datasets=(GPM_BATCH,), group=G),
    Rule("timeline_tensor_util_rises_with_width", "At batch 16, GPM tensor-pipe utilisation of "
         "the widest model is at least 2x that of the narrowest",
         "timeline_gpm_tensor_util_ratio_width", ">=", 2.0, "x", partly=1.25,
         datasets=(GPM_WIDTH,), group=G),
    Rule("timeline_b1_idles_unprofiled", "Without a profiler the GPU idles at least 20 % of an "
         "eager batch-1 forward (width 1, 640 px: the sweep's latency against its own GPU busy "
         "time, or the traced kernel time where the sweep lacks it)",
         "timeline_sweep_idle_b1_pct", ">=", 20.0, "%", partly=5.0, datasets=(TRACE, SWEEP),
         group=G),
    Rule("timeline_graph_removes_gaps", "A CUDA graph replay at batch 1 (width 1, 640 px) takes "
         "at most 1.2x the forward's summed kernel time: the graph removes the launch gaps",
         "timeline_graph_over_kernel_time_b1", "<=", 1.2, "x", partly=1.5,
         datasets=(TRACE, SWEEP), group=G),
    Rule("timeline_large_batch_no_gaps", "At the largest traced batch (width 1) the GPU idles "
         "under 10 % of the forward, even under the profiler",
         "timeline_trace_idle_largest_pct", "<", 10.0, "%", partly=25.0, datasets=(TRACE,),
         group=G),
    Rule("timeline_gpm_cheap", "Watching is cheap: the GPM sampler costs under 2 % of "
         "throughput at every measured config", "timeline_gpm_overhead_pct", "<", 2.0, "%",
         partly=5.0, datasets=(GPM_OVERHEAD,), group=G),
])
# fmt: on

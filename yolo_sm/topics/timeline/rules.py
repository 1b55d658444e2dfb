"""Headline findings of notebook 05 (SM timeline), as rules over the facts of
:func:`yolo_sm.topics.timeline.analyse.facts`."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.timeline.analyse import GPM_BATCH, GPM_OVERHEAD, GPM_WIDTH, SWEEP, TRACE

GROUP = "05_sm_timeline"

RULES: tuple[Rule, ...] = check_unique(
    [
        Rule(
            id="timeline_gpm_coarse",
            statement="One GPM window spans at least 10 batch-1 forwards: GPM shows a "
            "workload's steady state, never a single forward",
            fact="timeline_forwards_per_gpm_window",
            op=">=",
            threshold=10.0,
            partly=2.0,
            unit="x",
            datasets=(GPM_BATCH, SWEEP),
            group=GROUP,
        ),
        Rule(
            id="timeline_sm_occupancy_rises_with_batch",
            statement="GPM SM occupancy at the largest batch is at least 3x that at batch 1 "
            "(one width)",
            fact="timeline_gpm_sm_occupancy_ratio_batch",
            op=">=",
            threshold=3.0,
            partly=1.5,
            unit="x",
            datasets=(GPM_BATCH,),
            group=GROUP,
        ),
        Rule(
            id="timeline_tensor_util_rises_with_width",
            statement="At one batch, GPM tensor-pipe utilisation of the widest model is at "
            "least 2x that of the narrowest",
            fact="timeline_gpm_tensor_util_ratio_width",
            op=">=",
            threshold=2.0,
            partly=1.25,
            unit="x",
            datasets=(GPM_WIDTH,),
            group=GROUP,
        ),
        Rule(
            id="timeline_b1_idles_under_profiler",
            statement="Under the profiler the GPU idles over half of an eager batch-1 forward "
            "between kernels",
            fact="timeline_trace_idle_b1_pct",
            op=">",
            threshold=50.0,
            partly=20.0,
            unit="%",
            datasets=(TRACE,),
            group=GROUP,
        ),
        Rule(
            id="timeline_b1_idles_unprofiled",
            statement="Without the profiler the GPU still idles at least 20 % of an eager "
            "batch-1 forward (the sweep's latency against its own GPU busy time, or the traced "
            "kernel time where the sweep lacks it)",
            fact="timeline_sweep_idle_b1_pct",
            op=">=",
            threshold=20.0,
            partly=5.0,
            unit="%",
            datasets=(TRACE, SWEEP),
            group=GROUP,
        ),
        Rule(
            id="timeline_graph_removes_gaps",
            statement="A CUDA graph replay at batch 1 takes at most 1.2x the summed kernel time "
            "of the forward: the graph removes the launch gaps",
            fact="timeline_graph_over_kernel_time_b1",
            op="<=",
            threshold=1.2,
            partly=1.5,
            unit="x",
            datasets=(TRACE, SWEEP),
            group=GROUP,
        ),
        Rule(
            id="timeline_large_batch_no_gaps",
            statement="At the largest traced batch the GPU idles under 10 % of the forward, "
            "even under the profiler",
            fact="timeline_trace_idle_largest_pct",
            op="<",
            threshold=10.0,
            partly=25.0,
            unit="%",
            datasets=(TRACE,),
            group=GROUP,
        ),
        Rule(
            id="timeline_gpm_cheap",
            statement="Watching is cheap: the GPM sampler costs under 2 % of throughput",
            fact="timeline_gpm_overhead_pct",
            op="<",
            threshold=2.0,
            partly=5.0,
            unit="%",
            datasets=(GPM_OVERHEAD,),
            group=GROUP,
        ),
    ]
)

"""Rules of the host's share of a forward (notebook 08, group launches): read
:func:`yolo_sm.topics.launches.hosts.facts`."""

from __future__ import annotations

from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE
from yolo_sm.report.rules import Rule
from yolo_sm.topics.launches.hosts import PREFIX, SWEEP
from yolo_sm.topics.roofline.rules import GROUP_LAUNCHES

#: the launching thread's CPU time per forward over the forward's own, %: "the host is the pace"
CPU_SHARE_PCT = 90.0
IDLE_PCT = 100 * HOST_BOUND_IDLE_SHARE

RULES: tuple[Rule, ...] = (
    Rule(
        id="hosts_eager_small_batch_host_bound",
        statement=f"At its smallest batch, eager is host-bound at every width (the GPU idle for "
        f"more than {IDLE_PCT:g} % of the forward; share of widths)",
        fact=PREFIX + "eager_small_host_bound_share_pct",
        op=">=",
        threshold=100.0,
        partly=50.0,
        unit="%",
        datasets=(SWEEP,),
        group=GROUP_LAUNCHES,
    ),
    Rule(
        id="hosts_eager_small_batch_cpu_time",
        statement=f"There the launching thread's CPU time per forward is at least "
        f"{CPU_SHARE_PCT:g} % of the forward's time (median over widths): the host's CPU is "
        "the forward's pace",
        fact=PREFIX + "eager_small_cpu_share_pct",
        op=">=",
        threshold=CPU_SHARE_PCT,
        partly=75.0,
        unit="%",
        datasets=(SWEEP,),
        group=GROUP_LAUNCHES,
    ),
    Rule(
        id="hosts_graph_never_host_bound",
        statement="No CUDA-graph point of the sweep is host-bound (share of graph points)",
        fact=PREFIX + "graph_host_bound_share_pct",
        op="<=",
        threshold=0.0,
        partly=10.0,
        unit="%",
        datasets=(SWEEP,),
        group=GROUP_LAUNCHES,
    ),
)

"""Headline findings of the roofline, memory-and-layout and launches notebooks (06, 07, 08),
as rules over the facts of :func:`yolo_sm.topics.roofline.analyse.facts`; each rule's ``group``
names
its notebook.

The article claims this notebook also tests (6: occupancy against tensor-pipe use, 11: what
fusing C2f would remove, 14: ResNet's early against deep stages) are decided once, by the
claims' rules (group ``claims``); the notebook each belongs to shows its row next to these.
"""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.launches.analyse import SWEEP, TRACE, TRACE_COMPILE, TRACE_EAGER
from yolo_sm.topics.roofline.analyse import (
    CEILINGS,
    MODEL_LAYERS,
    NCU_LAYOUT,
    NCU_WIDE,
    NCU_YOLO,
    PREFIX,
)

#: The three notebooks these rules serve, one question each: the roofline, memory and layout,
#: launches.
GROUP_ROOFLINE = "06_roofline"
GROUP_MEMORY = "07_memory_and_layout"
GROUP_LAUNCHES = "08_launches"
GROUPS = (GROUP_ROOFLINE, GROUP_MEMORY, GROUP_LAUNCHES)
#: The claims' rules whose verdicts each notebook shows beside its own.
CLAIMS = {GROUP_ROOFLINE: ("claim_6", "claim_14"), GROUP_MEMORY: (), GROUP_LAUNCHES: ("claim_11",)}
ROOF = (NCU_YOLO, MODEL_LAYERS, CEILINGS)

#: One rule per headline finding (see :class:`yolo_sm.report.rules.Rule`).
RULES: tuple[Rule, ...] = check_unique(
    (
        Rule(
            id="roofline_yolo_under_roof",
            statement="At width 1.0 YOLOv8's layers with FLOPs reach under half of their roof "
            "(time-weighted share of the roof at each layer's intensity)",
            fact=PREFIX + "yolo_pct_of_roof_tw",
            op="<",
            threshold=50.0,
            unit="%",
            datasets=ROOF,
            scope="width=1.0",
            group=GROUP_ROOFLINE,
        ),
        Rule(
            id="roofline_yolo_compute_side",
            statement="At width 1.0 most of YOLOv8's kernel time is in layers on the compute "
            "side of the ridge point",
            fact=PREFIX + "yolo_compute_side_time_share",
            op=">=",
            threshold=0.5,
            datasets=ROOF,
            scope="width=1.0",
            group=GROUP_ROOFLINE,
        ),
        Rule(
            id="roofline_zero_flop_below_copy",
            statement="At width 1.0 the layers without FLOPs (Concat, Upsample) move data at "
            "under half the device-to-device copy ceiling",
            fact=PREFIX + "zero_flop_max_pct_of_copy",
            op="<",
            threshold=50.0,
            unit="%",
            datasets=ROOF,
            scope="width=1.0",
            group=GROUP_ROOFLINE,
        ),
        Rule(
            id="roofline_upsample_slow",
            statement="At width 1.0 the nearest-upsample layers move their bytes at under half "
            "the rate of the concatenations (median GB/s of each over the configs; neither "
            "computes anything)",
            fact=PREFIX + "upsample_over_concat_gbps",
            op="<",
            threshold=0.5,
            unit="x",
            datasets=ROOF,
            scope="width=1.0",
            group=GROUP_ROOFLINE,
        ),
        Rule(
            id="roofline_wide_tensor_pipe_rises",
            statement="The wide conv stack's tensor-pipe use rises from its first stage to its "
            "last (points of % of peak, means over width factors)",
            fact=PREFIX + "wide_tensor_pipe_rise_pct",
            op=">",
            threshold=0.0,
            unit="%",
            datasets=(NCU_WIDE,),
            group=GROUP_ROOFLINE,
        ),
        Rule(
            id="roofline_nchw_transforms",
            statement="In fp16 at width 1.0, NCHW spends at least 5 % of its kernel time in "
            "layout transforms (share of kernel time)",
            fact=PREFIX + "nchw_transform_time_share",
            op=">=",
            threshold=0.05,
            partly=0.01,
            datasets=(NCU_LAYOUT,),
            scope="precision=fp16",
            group=GROUP_MEMORY,
        ),
        Rule(
            id="roofline_narrow_eager_idles",
            statement="At width 0.25 and batch 8 the GPU runs no kernel for over a quarter of an "
            "eager forward (share of the eager median)",
            fact=PREFIX + "eager_gpu_idle_share",
            op=">",
            threshold=0.25,
            datasets=(SWEEP, TRACE),
            scope="width=0.25,batch=8",
            group=GROUP_LAUNCHES,
        ),
        Rule(
            id="roofline_compile_below_c2f_bound",
            statement="torch.compile removes fewer kernel launches than fusing each C2f block "
            "into one kernel would (measured share minus the bound)",
            fact=PREFIX + "compile_minus_c2f_bound_launch_share",
            op="<",
            threshold=0.0,
            datasets=(TRACE_EAGER, TRACE_COMPILE, TRACE),
            group=GROUP_LAUNCHES,
        ),
    )
)


def select(verdicts, group: str = GROUP_ROOFLINE):
    """The rows of a verdict table (:func:`yolo_sm.report.catalog.verdict_table`) that the
    notebook ``group`` (one of :data:`GROUPS`) shows: its own rules and its claims of
    :data:`CLAIMS`."""
    keep = (verdicts.group == group) | verdicts.id.isin(CLAIMS[group])
    return verdicts[keep].reset_index(drop=True)

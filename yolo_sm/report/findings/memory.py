"""Findings of the activation-memory sections of notebook 07 (lifetimes and the allocator's
pool), as rules over the facts of :func:`yolo_sm.analyse.memory.facts`."""

from __future__ import annotations

from yolo_sm.analyse.memory import LIFETIMES, POOL, PREFIX
from yolo_sm.report.findings.roofline import GROUP_MEMORY
from yolo_sm.report.rules import Rule, check_unique

#: the eager lifetime predictor's largest error on the measured peak that still "explains" it
PEAK_ERROR_PCT = 15.0
#: the share of all activation bytes a lifetime-reusing allocator must save
REUSE_SAVING_PCT = 50.0
#: the share of the peak live set that the neck's concatenations must hold
CONCAT_SHARE_PCT = 25.0
#: the throughput ratio within which expandable segments count as costing nothing
SAME_SPEED = 0.95

RULES: tuple[Rule, ...] = check_unique(
    (
        Rule(
            id="memory_peak_predicted",
            statement="The recorded lifetimes (weights + input + activations live as eager "
            "PyTorch held them) explain torch.cuda.max_memory_allocated of the same forward "
            f"within {PEAK_ERROR_PCT:g} % for every model measured (largest error)",
            fact=PREFIX + "peak_error_pct_max",
            op="<=",
            threshold=PEAK_ERROR_PCT,
            partly=2 * PEAK_ERROR_PCT,
            unit="%",
            datasets=(LIFETIMES,),
            group=GROUP_MEMORY,
        ),
        Rule(
            id="memory_reuse_saves",
            statement="An allocator that reuses memory by lifetime needs under half the bytes "
            "of giving every activation its own (smallest saving over the models)",
            fact=PREFIX + "reuse_saving_pct_min",
            op=">=",
            threshold=REUSE_SAVING_PCT,
            unit="%",
            datasets=(LIFETIMES,),
            group=GROUP_MEMORY,
        ),
        Rule(
            id="memory_concat_holds_peak",
            statement="At YOLOv8 width 1.0 the tensors waiting for the neck's concatenations "
            f"hold at least {CONCAT_SHARE_PCT:g} % of the live set at the forward's peak",
            fact=PREFIX + "concat_share_at_peak_pct",
            op=">=",
            threshold=CONCAT_SHARE_PCT,
            unit="%",
            datasets=(LIFETIMES,),
            scope="model=yolov8,width=1",
            group=GROUP_MEMORY,
        ),
        Rule(
            id="memory_eager_holds_more",
            statement="At YOLOv8 width 1.0 eager PyTorch's peak of live activations is above "
            "the peak of freeing each tensor at its last use",
            fact=PREFIX + "eager_excess_pct",
            op=">",
            threshold=0.0,
            unit="%",
            datasets=(LIFETIMES,),
            scope="model=yolov8,width=1",
            group=GROUP_MEMORY,
        ),
        Rule(
            id="memory_expandable_lowers_peak",
            statement="Expandable segments lower the peak reserved memory of a run of random "
            "batch sizes (ratio to the default allocator)",
            fact=PREFIX + "expandable_peak_reserved_ratio",
            op="<",
            threshold=1.0,
            partly=1.05,
            unit="x",
            datasets=(POOL,),
            group=GROUP_MEMORY,
        ),
        Rule(
            id="memory_expandable_same_speed",
            statement="Expandable segments keep the run's throughput within "
            f"{100 * (1 - SAME_SPEED):g} % of the default allocator's (img/s ratio)",
            fact=PREFIX + "expandable_img_per_s_ratio",
            op=">=",
            threshold=SAME_SPEED,
            unit="x",
            datasets=(POOL,),
            group=GROUP_MEMORY,
        ),
    )
)

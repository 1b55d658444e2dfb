"""Findings of the activation-memory sections of notebook 07 (lifetimes and the allocator's
pool), as rules over the facts of :func:`yolo_sm.topics.memory.analyse.facts`. What the model's
graph
fixes (the reuse saving, eager's excess over freeing at last use, the shares at the peak) is the
same on every machine: a table (:func:`yolo_sm.topics.memory.analyse.peak_view`), not a rule."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.memory.analyse import LIFETIMES, POOL, PREFIX
from yolo_sm.topics.roofline.rules import GROUP_MEMORY

#: the eager lifetime predictor's largest error on the measured peak that still "explains" it
PEAK_ERROR_PCT = 15.0
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

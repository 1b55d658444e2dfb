"""Headline findings of the shapes notebooks (14: wide or deep at equal FLOPs; 15: one engine
per resolution or one dynamic engine), as rules over the facts of
:func:`yolo_sm.topics.shapes.analyse.facts`."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.rules import Rule, check_unique, evaluate, rule_maker
from yolo_sm.topics.shapes import analyse as shapes

WIDE_DEEP = (shapes.WIDE_DEEP,)
RESOLUTIONS = (shapes.RESOLUTIONS,)
GROUP_14, GROUP_15 = "14_wide_or_deep", "15_resolutions"

_wide_deep = rule_maker("shapes", GROUP_14)
_resolution = rule_maker("shapes", GROUP_15)


#: notebook 14
WIDE_DEEP_RULES: tuple[Rule, ...] = (
    _wide_deep(
        "wide_faster_b64",
        "At equal FLOPs the wider model is faster at batch 64 in a CUDA graph: at least 1.1x "
        "the deeper model's img/s in every pair",
        "shapes.wide_over_deep_min", ">=", 1.1, "x", WIDE_DEEP,
        scope="backend=cudagraph, batch=64", partly=1.0,
    ),
    _wide_deep(
        "wide_faster_b1_eager",
        "At batch 1 in eager mode, where the host issues every launch, the wider model runs at "
        "least 1.2x the deeper model's img/s (median over pairs)",
        "shapes.wide_over_deep_median", ">=", 1.2, "x", WIDE_DEEP,
        scope="backend=eager, batch=1", partly=1.0,
    ),
    _wide_deep(
        "deep_more_kernels",
        "The deeper model runs at least 1.3x the wider model's kernels per forward (median "
        "over pairs and batches, eager)",
        "shapes.deep_over_wide_kernels", ">=", 1.3, "x", WIDE_DEEP,
    ),
    _wide_deep(
        "wide_higher_occupancy",
        "At batch 64 in a CUDA graph the wider model's kernels reach a higher time-weighted "
        "estimated occupancy than the deeper model's (Kineto's estimate: the theoretical "
        "occupancy capped by the grid, not a measurement; median over pairs)",
        "shapes.occupancy_wide_minus_deep_pct", ">", 0.0, "points", WIDE_DEEP,
        scope="backend=cudagraph, batch=64",
    ),
)  # fmt: skip

#: notebook 15
RESOLUTION_RULES: tuple[Rule, ...] = (
    _resolution(
        "dynamic_cost_small",
        "One dynamic-shape engine (the eager module serving every resolution) costs at most "
        "10 % of the img/s of the fixed-shape engine built for each resolution (the worst "
        "width and resolution)",
        "shapes.dynamic_cost_max_pct", "<=", 10.0, "%", RESOLUTIONS,
        scope="dynamic=eager", partly=25.0,
    ),
    _resolution(
        "large_inputs_fill_gpu",
        "The fixed-shape engines process at least as many megapixels per second at the largest "
        "resolution as at the smallest (median over widths)",
        "shapes.mpix_largest_over_smallest", ">=", 1.0, "x", RESOLUTIONS,
    ),
    _resolution(
        "nearest_engine_pays",
        "Serving each frame on the nearest engine rather than on the largest one runs at least "
        "1.5x the img/s (the least gain over widths and frames)",
        "shapes.nearest_over_largest_engine", ">=", 1.5, "x", RESOLUTIONS,
    ),
)  # fmt: skip

RULES: tuple[Rule, ...] = check_unique(WIDE_DEEP_RULES + RESOLUTION_RULES)


def verdicts(root: DataRoot, group: str | None = None) -> pd.DataFrame:
    """The findings' verdict table for ``root`` (``group``: one notebook's rules only)."""
    chosen = [r for r in RULES if group is None or r.group == group]
    return evaluate(chosen, shapes.facts(root), root.name)

"""Headline findings of the heatmaps notebook, as rules over the facts of
:func:`yolo_sm.topics.heatmaps.analyse.facts`. The width claim's facts
(``achieved_occupancy_tw_pct_min``
at ``width<=1.25`` and the others listed there) are judged by the claims, not here."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.heatmaps.analyse import BATCH_NCU, PRECISION_NCU, PROFILE, WIDTH_NCU

GROUP = "04_occupancy_heatmaps"

#: One rule per headline finding (see :class:`yolo_sm.report.rules.Rule`).
RULES: tuple[Rule, ...] = check_unique(
    (
        Rule(
            id="heatmaps_slowest_layer_low",
            statement="The slowest layer of the widest forward runs below 50 % achieved occupancy",
            fact="slowest_layer_achieved_occupancy_tw_pct_widest",
            op="<",
            threshold=50.0,
            unit="%",
            datasets=(WIDTH_NCU,),
            group=GROUP,
        ),
        Rule(
            id="heatmaps_resources_minor",
            statement="Registers and shared memory cap less than half of the forward's kernel "
            "time at every width (kernels whose smallest block limit is registers or shared "
            "memory, whatever their grid; batch 8)",
            fact="resource_limited_time_share_max_over_widths",
            op="<",
            threshold=50.0,
            unit="%",
            datasets=(WIDTH_NCU,),
            group=GROUP,
        ),
        Rule(
            id="heatmaps_small_batch_grid_limited",
            statement="At the smallest batch, most kernel time runs in grids of less than one wave",
            fact="grid_limited_time_share_smallest_batch",
            op=">=",
            threshold=50.0,
            partly=25.0,
            unit="%",
            datasets=(BATCH_NCU,),
            group=GROUP,
        ),
        Rule(
            id="heatmaps_kineto_matches_ncu",
            statement="Kineto's per-layer estimate is within 10 points of ncu's achieved "
            "occupancy on at least 90 % of the layers",
            fact="kineto_layers_within_10_share",
            op=">=",
            threshold=90.0,
            partly=70.0,
            unit="%",
            datasets=(PROFILE,),
            group=GROUP,
        ),
        Rule(
            id="heatmaps_fastest_not_highest_occupancy",
            statement="The fastest precision and layout is not the one at the highest "
            "achieved occupancy",
            fact="fastest_variant_occupancy_below_highest_pct_points",
            op=">",
            threshold=1.0,
            unit="points",
            datasets=(PRECISION_NCU,),
            group=GROUP,
        ),
    )
)

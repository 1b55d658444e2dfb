"""The heatmaps' rules (notebook 04), over :func:`yolo_sm.topics.heatmaps.analyse.facts` (the
width claims of notebook 09 judge the facts scoped by width)."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.heatmaps.analyse import BATCH_NCU, PRECISION_NCU, PROFILE, WIDTH_NCU

G = "04_occupancy_heatmaps"

RULES: tuple[Rule, ...] = check_unique((
    Rule(id="heatmaps_slowest_layer_low", group=G,
         statement="The slowest layer of the widest forward (YOLOv8, fp16 NHWC, batch 8) runs "
         "below 50 % achieved occupancy (time-weighted)",
         fact="slowest_layer_achieved_occupancy_tw_pct_widest", op="<", threshold=50.0,
         unit="%", datasets=(WIDTH_NCU,)),
    Rule(id="heatmaps_resources_cap_tensor_cores", group=G,
         statement="At every width (YOLOv8, fp16 NHWC, batch 8), registers or shared memory set "
         "the active blocks of at least 90 % of the tensor-core kernels' time (their block "
         "limit below the warp-slot and block-slot limits, whatever the grid)",
         fact="tc_resource_capped_time_share_min_over_widths", op=">=", threshold=90.0,
         partly=50.0, unit="%", datasets=(WIDTH_NCU,)),
    Rule(id="heatmaps_small_batch_grid_limited", group=G,
         statement="At the smallest batch (YOLOv8 width 1, fp16 NHWC), most kernel time runs in "
         "grids of less than one wave",
         fact="grid_limited_time_share_smallest_batch", op=">=", threshold=50.0, partly=25.0,
         unit="%", datasets=(BATCH_NCU,)),
    Rule(id="heatmaps_kineto_matches_ncu", group=G,
         statement="Kineto's per-layer estimate is within 10 points of ncu's achieved "
         "occupancy on at least 90 % of the profiled layers",
         fact="kineto_layers_within_10_share", op=">=", threshold=90.0, partly=70.0, unit="%",
         datasets=(PROFILE,)),
    Rule(id="heatmaps_fastest_not_highest_occupancy", group=G,
         statement="The precision and layout with the fastest forward (YOLOv8 width 1, batch 8) "
         "is not the one at the highest achieved occupancy (points below it)",
         fact="fastest_variant_occupancy_below_highest_pct_points", op=">", threshold=1.0,
         unit="points", datasets=(PRECISION_NCU,)),
))  # fmt: skip

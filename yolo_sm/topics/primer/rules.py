"""The occupancy primer's rules (notebook 00)."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.primer.analyse import NCU, NCU_TABLES, SIMT_TABLE

G = "00_occupancy_primer"

RULES: tuple[Rule, ...] = check_unique((
    Rule(id="primer_calculator_matches_ncu", group=G,
         statement="The occupancy calculator gives Nsight Compute's theoretical occupancy on every "
         "distinct launch shape of the root's Nsight Compute tables (shapes it misses)",
         fact="calculator_mismatch_share", op="<=", threshold=0.0, partly=1.0, unit="%",
         datasets=NCU_TABLES),
    Rule(id="primer_flagship_two_limits", group=G,
         statement="The launch shape holding most tensor-core convolution time (YOLOv8 widths, "
         "fp16 NHWC, batch 8) has its active blocks set by registers and shared memory alike "
         "(Nsight Compute's block limits, in every table holding that shape)",
         fact="flagship_resource_limits", op=">=", threshold=2.0, partly=1.0, unit="limits",
         datasets=NCU_TABLES),
    Rule(id="primer_flagship_one_wave", group=G,
         statement="Every launch of that shape has a grid of at most the SM count (one block per "
         "SM, one wave), as a persistent tile scheduler does",
         fact="flagship_grid_at_most_sm_count_share", op=">=", threshold=100.0, partly=50.0,
         unit="%", datasets=NCU_TABLES),
    Rule(id="primer_simt_conv_slow", group=G,
         statement="The slowest fp32 SIMT convolutions take at least 5x the GPU time of the "
         "fastest tensor-core convolutions per forward (YOLOv8 width 1, batch 8, precisions x "
         "layouts)",
         fact="simt_over_tensor_conv_time_ratio", op=">=", threshold=5.0, partly=2.0, unit="x",
         datasets=(SIMT_TABLE,)),
    Rule(id="primer_simt_conv_like_occupancy", group=G,
         statement="Those SIMT convolutions run within 10 points of those tensor-core "
         "convolutions' achieved occupancy (time-weighted): occupancy does not tell them apart",
         fact="simt_tensor_conv_achieved_occupancy_gap_pct_points", op="<=", threshold=10.0,
         partly=20.0, unit="points", datasets=(SIMT_TABLE,)),
    Rule(id="primer_tc_conv_below_60", group=G,
         statement="Most tensor-core convolution time of the width-1 forward (fp16 NHWC, batch 8) "
         "runs below 60 % achieved occupancy",
         fact="tc_conv_time_share_below_60_achieved", op=">=", threshold=50.0, unit="%",
         datasets=(NCU,)),
    Rule(id="primer_memory_kernels_high_occupancy", group=G,
         statement="In the width-1 forward (fp16 NHWC, batch 8) the data-movement kernels "
         "(elementwise, copy/concat, pooling/upsample) run at least 20 points above the "
         "tensor-core convolutions in achieved occupancy (time-weighted)",
         fact="memory_minus_tc_conv_achieved_occupancy_pct_points", op=">=", threshold=20.0,
         partly=5.0, unit="points", datasets=(NCU,)),
))  # fmt: skip

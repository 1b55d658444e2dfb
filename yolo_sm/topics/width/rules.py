"""Headline findings of the width notebook (01), as rules over the facts of
:func:`yolo_sm.topics.width.analyse.facts`. Each threshold is the line where the sentence stops
being true of the data; the verdict table says, per machine, which ones hold."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique, rule_maker
from yolo_sm.topics.width.analyse import BENCH, CEILINGS, NCU_WIDE, NCU_WIDTH, PRESETS, SWEEP

GROUP = "01_width_scaling"


_rule = rule_maker("width", GROUP)


#: Work and throughput per width (the sweep, CUDA graphs at the Nsight Compute batch).
THROUGHPUT = (
    _rule(
        "wider_slower_per_image",
        "A wider model runs fewer images per second (CUDA graph at the occupancy pass's batch, "
        "8 by default; widest over narrowest img/s)",
        "img_per_s_widest_over_narrowest",
        "<",
        1.0,
        "x",
        (SWEEP,),
    ),
    _rule(
        "wider_slower_than_flops",
        "A wider model runs slower than its FLOPs predict: delivered TFLOP/s fall with width "
        "(CUDA graph at the occupancy pass's batch, 8 by default; widest over narrowest)",
        "tflops_widest_over_narrowest",
        "<",
        1.0,
        "x",
        (SWEEP,),
    ),
    _rule(
        "best_point_half_ceiling",
        "The sweep's best point delivers a large share of the measured fp16 matmul ceiling",
        "best_share_of_fp16_ceiling",
        ">=",
        50.0,
        "%",
        (SWEEP, CEILINGS),
        partly=25.0,
    ),
    _rule(
        "batch1_eager_flat",
        "Eager batch 1 runs about the same img/s whatever the width (fastest over slowest)",
        "batch1_eager_spread",
        "<=",
        1.5,
        "x",
        (SWEEP,),
        partly=2.0,
    ),
)

#: Occupancy per width (Nsight Compute, one forward per width).
OCCUPANCY = (
    _rule(
        "occupancy_flat",
        "Occupancy barely moves with width: time-weighted achieved occupancy spans a narrow "
        "range over the widths",
        "width_achieved_occupancy_range",
        "<=",
        10.0,
        "pp",
        (NCU_WIDTH,),
        partly=20.0,
    ),
    _rule(
        "wider_lower_occupancy",
        "A wider model runs at lower achieved occupancy (widest minus narrowest)",
        "width_achieved_occupancy_change",
        "<=",
        -5.0,
        "pp",
        (NCU_WIDTH,),
    ),
    _rule(
        "tc_conv_occupancy_fixed",
        "Tensor-core convolutions keep their theoretical occupancy at every width (range)",
        "tensor_core_conv_theoretical_range",
        "<=",
        5.0,
        "pp",
        (NCU_WIDTH,),
        partly=10.0,
    ),
    _rule(
        "tc_conv_share_grows",
        "Tensor-core convolutions take a larger share of the kernel time as width grows",
        "tensor_core_conv_share_change",
        ">=",
        5.0,
        "pp",
        (NCU_WIDTH,),
        partly=1.0,
    ),
    _rule(
        "sm_coverage_grows",
        "Wider layers fill more of the SMs' block slots (SM coverage, widest minus narrowest)",
        "width_sm_coverage_change",
        ">=",
        5.0,
        "pp",
        (NCU_WIDTH,),
        partly=1.0,
    ),
)

#: The wide conv stack's dominant tensor-core convolution.
WIDE_STACK = (
    _rule(
        "block_does_not_widen",
        "The wide stack's dominant convolution keeps one block size at every width",
        "wide_main_block_sizes",
        "<=",
        1.0,
        "block sizes",
        (NCU_WIDE,),
    ),
    _rule(
        "occupancy_set_by_kernel",
        "Its theoretical occupancy is the same at every width (range)",
        "wide_main_theoretical_range",
        "<=",
        1.0,
        "pp",
        (NCU_WIDE,),
    ),
    _rule(
        "persistent_grid",
        "Its grid is at most one wave: a persistent kernel that loops over tiles",
        "wide_main_waves_max",
        "<=",
        1.0,
        "waves",
        (NCU_WIDE,),
    ),
    _rule(
        "resources_bind",
        "Registers or shared memory, not warps, bind its occupancy (the lower of their block "
        "limits over the warp limit)",
        "wide_main_resource_over_warp_limit",
        "<",
        1.0,
        "x",
        (NCU_WIDE,),
    ),
    _rule(
        "tensor_pipe_busier",
        "The tensor pipe gets busier as the stack widens (widest minus narrowest)",
        "wide_main_tensor_pipe_change",
        ">=",
        5.0,
        "pp",
        (NCU_WIDE,),
        partly=1.0,
    ),
)

#: The standard presets (n to x).
PRESET_RULES = (
    _rule(
        "presets_cost_order",
        "A preset with more FLOPs per image never runs more img/s than a cheaper one",
        "presets_inversions",
        "<=",
        0.0,
        "points",
        (PRESETS,),
    ),
    _rule(
        "presets_cost_order_unbound",
        "Where the host did not set the pace of either point (host-bound points left out), a "
        "preset with more FLOPs never runs more img/s than a cheaper one",
        "presets_inversions_not_host_bound",
        "<=",
        0.0,
        "points",
        (PRESETS,),
    ),
    _rule(
        "presets_all_measured",
        "Every preset point passed its numerical check and has figures",
        "presets_points_without_figures",
        "<=",
        0.0,
        "points",
        (PRESETS,),
    ),
    _rule(
        "presets_one_run",
        "The presets were measured in one run (side by side)",
        "presets_runs",
        "<=",
        1.0,
        "runs",
        (PRESETS,),
    ),
    *(
        _rule(
            f"presets_{fam}_bigger_uses_gpu_better",
            f"{fam}'s costliest preset delivers more TFLOP/s than its cheapest (fp16, CUDA "
            "graph, largest batch; presets with figures)",
            "presets_tflops_costliest_over_cheapest",
            ">",
            1.0,
            "x",
            (PRESETS,),
            scope=f"family={fam}",
        )
        for fam in ("yolov8", "yolo11")
    ),
)

#: torch.compile per width (the fast-engines bench).
COMPILE = (
    _rule(
        "compile_gain_falls",
        "torch.compile's gain over eager falls with width at the largest batch (widest over "
        "narrowest)",
        "compile_gain_widest_over_narrowest",
        "<",
        1.0,
        "x",
        (BENCH,),
    ),
    _rule(
        "compile_gain_not_launches",
        "At the largest batch compile's gain is not launch cost: a CUDA graph alone gives less "
        "at every width (largest graph-over-compile ratio)",
        "graph_over_compile_max_large_batch",
        "<",
        1.0,
        "x",
        (BENCH,),
    ),
    _rule(
        "small_batch_launches_pay",
        "At the smallest batch removing launches pays more than fusing kernels (median CUDA "
        "graph gain over median compile gain)",
        "graph_over_compile_small_batch",
        ">",
        1.0,
        "x",
        (BENCH,),
    ),
    _rule(
        "baselines_agree",
        "Where the GPU set the pace in both runs (host-bound points left out), the bench's "
        "eager baselines agree with the width sweep's (another run), largest gap",
        "bench_vs_sweep_eager_max_dev",
        "<=",
        10.0,
        "%",
        (BENCH, SWEEP),
        partly=25.0,
    ),
)

#: One rule per headline finding of notebook 01 (see :class:`yolo_sm.report.rules.Rule`).
RULES: tuple[Rule, ...] = check_unique(THROUGHPUT + OCCUPANCY + WIDE_STACK + PRESET_RULES + COMPILE)

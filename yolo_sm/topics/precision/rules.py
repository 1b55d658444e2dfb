"""Headline findings of the precision notebook (02), as rules over the facts of
:func:`yolo_sm.topics.precision.analyse.facts`. Each threshold is the line where the sentence stops
being true of the data; the verdict table says, per machine, which ones hold."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique, rule_maker
from yolo_sm.topics.precision.analyse import (
    NCU,
    NUMERICS,
    SWEEP_BF16_NHWC,
    SWEEP_FP16_NHWC,
    SWEEPS,
    TENSOR_CORE_PRECISIONS,
)
from yolo_sm.topics.precision.eight_bit import (
    BENCH_8BIT,
    NUMERICS_8BIT,
    OCCUPANCY_SAME_PTS,
    TRACE_FP8,
    TRACE_INT8,
)
from yolo_sm.topics.precision.int8_rules import RULES as INT8_KERNELS
from yolo_sm.topics.width.analyse import BENCH

GROUP = "02_precision"


_rule = rule_maker("precision", GROUP)


#: Speed-ups over fp32, same run (NCHW sweeps).
SPEED = tuple(
    r
    for p in TENSOR_CORE_PRECISIONS
    for r in (
        _rule(
            f"{p}_faster_large_batch",
            f"{p} runs faster than fp32 at every width at the largest batch (CUDA graph, same "
            "run; smallest speed-up)",
            "speedup_large_batch_min",
            ">",
            1.0,
            "x",
            SWEEPS,
            scope=f"precision={p}",
        ),
        _rule(
            f"{p}_hidden_by_launches",
            f"Eager at the smallest batch, launches hide most of {p}'s gain (median speed-up "
            "over fp32)",
            "speedup_eager_small_batch",
            "<",
            1.2,
            "x",
            SWEEPS,
            partly=1.5,
            scope=f"precision={p}",
        ),
    )
) + (
    _rule(
        "pairs_side_by_side",
        "Every ratio pairs two points measured close together in time (largest gap)",
        "ratio_minutes_apart_max",
        "<=",
        10.0,
        "min",
        SWEEPS,
    ),
    _rule(
        "grid_complete",
        "The sweeps hold every point their plan steps name",
        "sweep_grid_missing_points",
        "<=",
        0.0,
        "points",
        SWEEPS,
    ),
)

#: What changes in the kernels (Nsight Compute, one forward per precision and layout).
KERNELS = (
    _rule(
        "fp32_on_simt",
        "fp32 (NCHW) spends most of its kernel time in SIMT (FFMA) convolutions",
        "simt_share_fp32_nchw",
        ">=",
        50.0,
        "%",
        (NCU,),
        partly=25.0,
    ),
    _rule(
        "fp16_off_simt",
        "fp16 NHWC runs its convolutions on tensor cores (SIMT convolutions' share of its time)",
        "simt_share_fp16_nhwc",
        "<=",
        1.0,
        "%",
        (NCU,),
        partly=10.0,
    ),
    _rule(
        "fp16_less_kernel_time",
        "fp16 NHWC needs far less kernel time than fp32 NCHW (fp32 time over fp16's)",
        "kernel_time_fp32_nchw_over_fp16_nhwc",
        ">=",
        2.0,
        "x",
        (NCU,),
        partly=1.0,
    ),
    _rule(
        "tc_conv_low_occupancy",
        "Tensor-core convolutions run at low theoretical occupancy (fp16 NHWC, time-weighted)",
        "tensor_core_conv_theoretical_fp16_nhwc",
        "<=",
        25.0,
        "%",
        (NCU,),
        partly=50.0,
    ),
    _rule(
        "occupancy_rises",
        "Time-weighted achieved occupancy over the forward is higher in fp16 NHWC than in fp32 "
        "NCHW",
        "achieved_occupancy_fp16_nhwc_minus_fp32_nchw",
        ">",
        0.0,
        "pp",
        (NCU,),
    ),
    _rule(
        "high_occupancy_kernels_grow",
        "Kernels at high theoretical occupancy (elementwise, copies, pooling) take a larger "
        "share of fp16 NHWC's time than of fp32 NCHW's",
        "high_occupancy_share_fp16_nhwc_minus_fp32_nchw",
        ">",
        0.0,
        "pp",
        (NCU,),
    ),
    _rule(
        "nhwc_no_transforms",
        "Tensor-core precisions in NHWC need no layout transforms (largest share)",
        "layout_transform_share_tensor_core_nhwc_max",
        "<=",
        1.0,
        "%",
        (NCU,),
        partly=5.0,
    ),
    _rule(
        "fp32_nhwc_pays_transforms",
        "fp32 given NHWC pays for layout transforms",
        "layout_transform_share_fp32_nhwc",
        ">=",
        1.0,
        "%",
        (NCU,),
        partly=0.1,
    ),
)

#: bf16 against fp16 in NHWC.
PAIR = (
    _rule(
        "bf16_as_fast_as_fp16",
        "bf16 runs as fast as fp16 in NHWC (median same-run ratio's distance from 1)",
        "bf16_vs_fp16_median_ratio_dev",
        "<=",
        5.0,
        "%",
        (SWEEP_BF16_NHWC,),
        partly=10.0,
    ),
    _rule(
        "bf16_same_kernel_time",
        "bf16 and fp16 NHWC need the same kernel time per forward (difference)",
        "bf16_vs_fp16_kernel_time_dev",
        "<=",
        5.0,
        "%",
        (NCU,),
        partly=10.0,
    ),
    _rule(
        "bf16_one_layer",
        "One layer holds most of the bf16-fp16 kernel-time difference (its share)",
        "bf16_vs_fp16_top_layer_share_of_diff",
        ">=",
        50.0,
        "%",
        (NCU,),
        partly=25.0,
    ),
    _rule(
        "bf16_same_kernels",
        "bf16 and fp16 run the same kernel classes in every layer (layers that differ)",
        "bf16_vs_fp16_layers_changing_class",
        "<=",
        0.0,
        "layers",
        (NCU,),
    ),
)

#: Numerical error.
ERRORS = (
    _rule(
        "gpu_within_tolerance",
        "Every sweep point is within its precision's tolerance (largest error over tolerance)",
        "gpu_error_over_tolerance_max",
        "<=",
        1.0,
        "x",
        (*SWEEPS, SWEEP_FP16_NHWC),
    ),
    _rule(
        "bf16_errs_more",
        "bf16 (8-bit mantissa) errs more than fp16 (11-bit): median error bf16 over fp16",
        "bf16_over_fp16_median_error",
        ">",
        1.0,
        "x",
        (*SWEEPS, SWEEP_FP16_NHWC),
    ),
    _rule(
        "numerics_within_tolerance",
        "On random inputs every precision is within its tolerance (numerics; largest error "
        "over tolerance)",
        "numerics_error_over_tolerance_max",
        "<=",
        1.0,
        "x",
        (NUMERICS,),
    ),
    _rule(
        "fp8_as_built_within_tolerance",
        "fp8 on the models as built is within the fp8 tolerance at every width (photos)",
        "fp8_error_over_tolerance_max",
        "<=",
        1.0,
        "x",
        (NUMERICS,),
    ),
    _rule(
        "fp8_prior_within_tolerance",
        "fp8 with the bench's class prior is within the fp8 tolerance at every width (photos)",
        "fp8_prior_error_over_tolerance_max",
        "<=",
        1.0,
        "x",
        (NUMERICS,),
    ),
    _rule(
        "fp8_engine_like_emulation",
        "The GPU fp8 engine errs like the emulated E4M3 rounding (largest deviation)",
        "fp8_engine_vs_emulation_max_dev",
        "<=",
        20.0,
        "%",
        (NUMERICS, BENCH),
        partly=50.0,
    ),
    _rule(
        "narrow_amplifies",
        "The narrowest model amplifies rounding: its error over the next width's, in every "
        "format (smallest ratio)",
        "narrowest_error_amplification_min",
        ">=",
        1.5,
        "x",
        (NUMERICS,),
        partly=1.1,
    ),
    _rule(
        "fp8_engine_passes",
        "The GPU fp8 engine passes its numerical check at every width and batch",
        "fp8_engine_batches_over_tolerance",
        "<=",
        0.0,
        "batches",
        (BENCH,),
    ),
)

#: the speed-up over fp16 that makes an 8-bit engine worth its quantisation (claim_10's)
EIGHT_BIT_SPEEDUP = 1.3

#: FP16, INT8 and FP8 side by side (bench_8bit, numerics_8bit). Whether an 8-bit engine is
#: faster than fp16 is one question, decided once: claim_10 (INT8) and claim_10_fp8 (notebook 09).
EIGHT_BIT = (
    _rule(
        "int8_convs_faster",
        "The int8 convolutions take less GPU time than the fp16 ones at every traced width "
        "(Kineto, eager, batch 64; largest ratio)",
        "int8_conv_over_fp16_conv_max",
        "<",
        1.0,
        "x",
        (TRACE_INT8,),
    ),
    _rule(
        "int8_quantise_pays",
        "What int8 saves in the convolutions and their bias / SiLU kernels exceeds what its "
        "quantisation passes cost at every traced width (largest cost over saving)",
        "int8_quantise_over_saving_max",
        "<",
        1.0,
        "x",
        (TRACE_INT8,),
    ),
    _rule(
        "int8_conv_occupancy_as_fp16",
        "The int8 engine's convolutions run at the theoretical occupancy of fp16's: their "
        f"time-weighted theoretical occupancy is within {OCCUPANCY_SAME_PTS:g} points of "
        "fp16's at every traced width (largest gap)",
        "int8_conv_occupancy_gap_max",
        "<=",
        OCCUPANCY_SAME_PTS,
        "points",
        (TRACE_INT8,),
    ),
    _rule(
        "fp8_conv_occupancy_as_fp16",
        "The fp8 engine's convolutions run at the theoretical occupancy of fp16's (within "
        f"{OCCUPANCY_SAME_PTS:g} points, time-weighted)",
        "fp8_conv_occupancy_gap_max",
        "<=",
        OCCUPANCY_SAME_PTS,
        "points",
        (TRACE_FP8,),
    ),
    _rule(
        "int8_leaves_fp16_parts",
        "The parts int8 leaves in fp16 as they are (copies, concatenations, pooling, "
        "upsampling) still take at least a quarter of the int8 forward's GPU time at every "
        "traced width (smallest share)",
        "int8_unchanged_pct_min",
        ">=",
        25.0,
        "%",
        (TRACE_INT8,),
    ),
    _rule(
        "int8_engine_passes",
        "The int8 engine passes its numerical check at every width of the bench (engines that "
        "failed)",
        "bench_engines_failed",
        "<=",
        0.0,
        "engines",
        (BENCH_8BIT,),
        scope="precision=int8",
    ),
    _rule(
        "int8_all_convs_int8",
        "Every int8 convolution ran on cuDNN's int8 path (most fp16 fallbacks in one engine)",
        "engine_fallbacks_max",
        "<=",
        0.0,
        "convs",
        (BENCH_8BIT,),
        scope="precision=int8",
    ),
    _rule(
        "int8_photos_within_tolerance",
        "int8 with the bench's class prior is within the int8 tolerance at every width and "
        "calibration (photos; largest error over tolerance)",
        "int8_error_over_tolerance_max",
        "<=",
        1.0,
        "x",
        (NUMERICS_8BIT,),
    ),
    _rule(
        "int8_boxes_agree",
        "int8's boxes after NMS match fp16's (smallest share matched at IoU >= 0.9, either "
        "direction)",
        "int8_box_match_min",
        ">=",
        90.0,
        "%",
        (NUMERICS_8BIT,),
        partly=75.0,
    ),
    _rule(
        "int8_percentile_helps",
        "Percentile calibration errs less than max calibration (median error ratio)",
        "int8_percentile_over_max_error",
        "<",
        1.0,
        "x",
        (NUMERICS_8BIT,),
    ),
)

#: One rule per headline finding of notebook 02 (see :class:`yolo_sm.report.rules.Rule`).
RULES: tuple[Rule, ...] = check_unique(SPEED + KERNELS + PAIR + ERRORS + EIGHT_BIT + INT8_KERNELS)

"""Notebook 02's rules (8-bit over fp16 speed: ``claim_10`` and ``claim_10_fp8`` of notebook 09)."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique

G = "02_precision"
SWEEPS = ("sweep_precision_core", "sweep_precision_rest")
CHECKED = (*SWEEPS, "sweep_fp16_nhwc")
NCU = ("ncu_precision_w1",)
NUM = ("numerics",)
TRACE = ("trace_int8_b64",)
B8 = ("bench_8bit",)
N8 = ("numerics_8bit",)
IK = ("int8_kernels",)
_B64 = "at every width at batch 64 (CUDA graph, same run; smallest speed-up over fp32)"
_B1 = "eager at batch 1, launches hide most of its gain (median speed-up over fp32 over the widths)"

RULES: tuple[Rule, ...] = check_unique((
    # speed over fp32, same run (NCHW sweeps)
    Rule("precision_tf32_faster_large_batch", f"tf32 runs faster than fp32 {_B64}",
         "speedup_b64_min", ">", 1.0, "x", datasets=SWEEPS, scope="precision=tf32", group=G),
    Rule("precision_fp16_faster_large_batch", f"fp16 runs faster than fp32 {_B64}",
         "speedup_b64_min", ">", 1.0, "x", datasets=SWEEPS, scope="precision=fp16", group=G),
    Rule("precision_bf16_faster_large_batch", f"bf16 runs faster than fp32 {_B64}",
         "speedup_b64_min", ">", 1.0, "x", datasets=SWEEPS, scope="precision=bf16", group=G),
    Rule("precision_tf32_hidden_by_launches", f"tf32 {_B1}", "speedup_eager_b1", "<", 1.2, "x",
         1.5, SWEEPS, "precision=tf32", G),
    Rule("precision_fp16_hidden_by_launches", f"fp16 {_B1}", "speedup_eager_b1", "<", 1.2, "x",
         1.5, SWEEPS, "precision=fp16", G),
    Rule("precision_bf16_hidden_by_launches", f"bf16 {_B1}", "speedup_eager_b1", "<", 1.2, "x",
         1.5, SWEEPS, "precision=bf16", G),
    # the kernels (Nsight Compute, width 1.0, batch 8, one forward per precision and layout)
    Rule("precision_fp32_on_simt", "fp32 NCHW spends most of its kernel time in SIMT (FFMA) "
         "convolutions (width 1.0, batch 8)", "simt_share_fp32_nchw", ">=", 50.0, "%", 25.0,
         NCU, group=G),
    Rule("precision_fp16_off_simt", "fp16 NHWC runs its convolutions on tensor cores (SIMT "
         "convolutions' share of its time, width 1.0, batch 8)", "simt_share_fp16_nhwc", "<=",
         1.0, "%", 10.0, NCU, group=G),
    Rule("precision_fp16_less_kernel_time", "fp16 NHWC needs far less kernel time than fp32 "
         "NCHW (fp32 time over fp16's, width 1.0, batch 8)",
         "kernel_time_fp32_nchw_over_fp16_nhwc", ">=", 2.0, "x", 1.0, NCU, group=G),
    Rule("precision_tc_conv_low_occupancy", "Tensor-core convolutions run at low theoretical "
         "occupancy (fp16 NHWC, width 1.0, batch 8, time-weighted)",
         "tensor_core_conv_theoretical_fp16_nhwc", "<=", 25.0, "%", 50.0, NCU, group=G),
    Rule("precision_occupancy_rises", "Time-weighted achieved occupancy of the forward is "
         "higher in fp16 NHWC than in fp32 NCHW (width 1.0, batch 8)",
         "achieved_occupancy_fp16_nhwc_minus_fp32_nchw", ">", 0.0, "pp", datasets=NCU, group=G),
    Rule("precision_high_occupancy_kernels_grow", "Kernels at high theoretical occupancy "
         "(elementwise, copies, pooling) take a larger share of fp16 NHWC's time than of fp32 "
         "NCHW's (width 1.0, batch 8)", "high_occupancy_share_fp16_nhwc_minus_fp32_nchw", ">",
         0.0, "pp", datasets=NCU, group=G),
    Rule("precision_nhwc_no_transforms", "Tensor-core precisions in NHWC need no layout "
         "transforms (largest share of kernel time, width 1.0, batch 8)",
         "layout_transform_share_tensor_core_nhwc_max", "<=", 1.0, "%", 5.0, NCU, group=G),
    Rule("precision_fp32_nhwc_pays_transforms", "fp32 given NHWC pays for layout transforms "
         "(their share of kernel time, width 1.0, batch 8)", "layout_transform_share_fp32_nhwc",
         ">=", 1.0, "%", 0.1, NCU, group=G),
    # bf16 against fp16 in NHWC
    Rule("precision_bf16_as_fast_as_fp16", "bf16 runs as fast as fp16 in NHWC (median same-run "
         "ratio's distance from 1, every width, batch and backend)",
         "bf16_vs_fp16_median_ratio_dev", "<=", 5.0, "%", 10.0, ("sweep_bf16_nhwc",), group=G),
    Rule("precision_bf16_same_kernel_time", "bf16 and fp16 NHWC need the same kernel time per "
         "forward (difference, width 1.0, batch 8)", "bf16_vs_fp16_kernel_time_dev", "<=", 5.0,
         "%", 10.0, NCU, group=G),
    Rule("precision_bf16_one_layer", "One layer holds most of the bf16-fp16 kernel-time "
         "difference (its share, width 1.0, batch 8)", "bf16_vs_fp16_top_layer_share_of_diff",
         ">=", 50.0, "%", 25.0, NCU, group=G),
    Rule("precision_bf16_same_kernels", "bf16 and fp16 run the same kernel classes in every "
         "layer (layers that differ, width 1.0, batch 8)", "bf16_vs_fp16_layers_changing_class",
         "<=", 0.0, "layers", datasets=NCU, group=G),
    # numerical error
    Rule("precision_gpu_within_tolerance", "Every sweep point passes its precision's numerical "
         "check (largest error over tolerance, rejected points included)",
         "gpu_error_over_tolerance_max", "<=", 1.0, "x", datasets=CHECKED, group=G),
    Rule("precision_bf16_errs_more", "bf16 (8-bit mantissa) errs more than fp16 (11-bit): "
         "median error of the NCHW sweep points, bf16 over fp16", "bf16_over_fp16_median_error",
         ">", 1.0, "x", datasets=CHECKED, group=G),
    Rule("precision_numerics_within_tolerance", "On random inputs every precision is within its "
         "tolerance (numerics; largest error over tolerance)",
         "numerics_error_over_tolerance_max", "<=", 1.0, "x", datasets=NUM, group=G),
    Rule("precision_fp8_as_built_within_tolerance", "fp8 on the models as built is within the "
         "fp8 tolerance at every width (photos)", "fp8_error_over_tolerance_max", "<=", 1.0,
         "x", datasets=NUM, group=G),
    Rule("precision_fp8_prior_within_tolerance", "fp8 with the bench's class prior is within "
         "the fp8 tolerance at every width (photos)", "fp8_prior_error_over_tolerance_max", "<=",
         1.0, "x", datasets=NUM, group=G),
    Rule("precision_fp8_engine_like_emulation", "The GPU fp8 engine errs like the emulated E4M3 "
         "rounding (largest deviation)", "fp8_engine_vs_emulation_max_dev", "<=", 20.0, "%",
         50.0, (*NUM, "bench_fast_engines"), group=G),
    Rule("precision_narrow_amplifies", "The narrowest model amplifies rounding: its error over "
         "the next width's, in every format (smallest ratio)",
         "narrowest_error_amplification_min", ">=", 1.5, "x", 1.1, NUM, group=G),
    Rule("precision_fp8_engine_passes", "The GPU fp8 engine passes its numerical check at every "
         "width and batch from 4", "fp8_engine_batches_over_tolerance", "<=", 0.0, "batches",
         datasets=("bench_fast_engines",), group=G),
    # what the 8-bit engines do inside (Kineto, eager, batch 64) and how they err
    Rule("precision_int8_convs_faster", "The int8 convolutions take less GPU time than the fp16 "
         "ones at every traced width (Kineto, eager, batch 64; largest ratio)",
         "int8_conv_over_fp16_conv_max", "<", 1.0, "x", datasets=TRACE, group=G),
    Rule("precision_int8_quantise_pays", "What int8 saves in the convolutions and their bias / "
         "SiLU kernels exceeds what its quantisation passes cost at every traced width (eager, "
         "batch 64; largest cost over saving)", "int8_quantise_over_saving_max", "<", 1.0, "x",
         datasets=TRACE, group=G),
    Rule("precision_int8_conv_occupancy_as_fp16", "The int8 convolutions run at fp16's "
         "theoretical occupancy: time-weighted, within 2 points at every traced width (eager, "
         "batch 64; largest gap)", "int8_conv_occupancy_gap_max", "<=", 2.0, "points",
         datasets=TRACE, group=G),
    Rule("precision_fp8_conv_occupancy_as_fp16", "The fp8 convolutions run at fp16's "
         "theoretical occupancy (time-weighted, within 2 points; eager, width 1.0, batch 64)",
         "fp8_conv_occupancy_gap_max", "<=", 2.0, "points", datasets=("trace_fp8_w1_b64",),
         group=G),
    Rule("precision_int8_leaves_fp16_parts", "The parts int8 leaves in fp16 (copies, "
         "concatenations, pooling, upsampling) take at least a quarter of the int8 forward's GPU "
         "time at every traced width (eager, batch 64; smallest share)",
         "int8_unchanged_pct_min", ">=", 25.0, "%", datasets=TRACE, group=G),
    Rule("precision_int8_engine_passes", "Every int8 engine of the bench ran and passed its "
         "numerical check (engines that failed, every width and batch)", "bench_engines_failed",
         "<=", 0.0, "engines", datasets=B8, scope="precision=int8", group=G),
    Rule("precision_int8_all_convs_int8", "Every int8 convolution ran on cuDNN's int8 path "
         "(most fp16 fallbacks in one engine of the bench)", "engine_fallbacks_max", "<=", 0.0,
         "convs", datasets=B8, scope="precision=int8", group=G),
    Rule("precision_int8_photos_within_tolerance", "int8 with the bench's class prior is within "
         "the int8 tolerance at every width and calibration (photos; largest error over "
         "tolerance)", "int8_error_over_tolerance_max", "<=", 1.0, "x", datasets=N8, group=G),
    Rule("precision_int8_boxes_agree", "int8's boxes after NMS match fp16's (smallest share "
         "matched at IoU >= 0.9, either direction)", "int8_box_match_min", ">=", 90.0, "%",
         75.0, N8, group=G),
    Rule("precision_int8_percentile_helps", "Percentile calibration errs less than max "
         "calibration (median error ratio over the widths)", "int8_percentile_over_max_error",
         "<", 1.0, "x", datasets=N8, group=G),
    # which int8 convolution kernel (each convolution timed alone, and whole models)
    Rule("int8_kernels_correct", "Every int8 kernel computes the int8 convolution exactly: its "
         "output lies within fp16 rounding of the int8 emulation on every convolution (largest "
         "distance)", "int8_kernels.conv_error_max", "<", 5e-3, "", datasets=IK, group=G),
    Rule("int8_kernels_triton_beats_cudnn", "yolo_sm's Triton implicit-GEMM kernel runs the "
         "model's int8 convolutions faster than cuDNN's int8 graphs at every measured width "
         "(summed over the convolutions, each timed alone; smallest ratio)",
         "int8_kernels.triton_over_cudnn_min", ">", 1.0, "x", datasets=IK, group=G),
    Rule("int8_kernels_fused_quantisation_pays", "Quantising the input inside the Triton kernel "
         "is faster than the separate quantiser pass before it at every measured width "
         "(smallest ratio)", "int8_kernels.fused_over_prequant_min", ">", 1.0, "x",
         datasets=IK, group=G),
    Rule("int8_kernels_int_mm_beats_cudnn", "torch._int_mm (cuBLASLt's int8 GEMM) runs the 1x1 "
         "convolutions faster than cuDNN's int8 graphs at every measured width (smallest ratio)",
         "int8_kernels.intmm_over_cudnn_min", ">", 1.0, "x", datasets=IK, group=G),
    Rule("int8_kernels_best_per_conv_beats_cudnn", "Choosing the fastest int8 kernel per "
         "convolution beats cuDNN's graphs alone by at least 5 % at every measured width "
         "(smallest ratio)", "int8_kernels.best_over_cudnn_min", ">=", 1.05, "x", 1.0, IK,
         group=G),
    Rule("int8_kernels_best_per_conv_beats_fp16", "With the fastest int8 kernel per "
         "convolution, the int8 convolutions take less time than fp16's at every measured width "
         "(smallest ratio, fp16 time over int8's)", "int8_kernels.best_over_fp16_min", ">", 1.0,
         "x", datasets=IK, group=G),
    Rule("int8_kernels_model_triton_beats_cudnn", "The int8 engine (one CUDA graph) runs faster "
         "with yolo_sm's Triton kernel than with cuDNN's graphs at every measured width "
         "(smallest img/s ratio)", "int8_kernels.model_triton_over_cudnn_min", ">", 1.0, "x",
         datasets=IK, group=G),
    Rule("int8_kernels_model_int_mm_beats_cudnn", "The int8 engine runs faster with "
         "torch._int_mm for its 1x1 convolutions than with cuDNN's graphs for all of them at "
         "every measured width (smallest img/s ratio)",
         "int8_kernels.model_intmm_over_cudnn_min", ">", 1.0, "x", datasets=IK, group=G),
    Rule("int8_kernels_ceiling_holds_for_cudnn", "cuDNN's fastest int8 convolution stays within "
         "the int8 matmul ceiling the ceilings step measured (burst; above 100 % the ceiling is "
         "not one)", "int8_kernels.cudnn_peak_of_int8_ceiling_pct", "<=", 100.0, "%",
         datasets=(*IK, "ceilings"), group=G),
    Rule("int8_kernels_triton_near_ceiling", "yolo_sm's Triton kernel reaches at least half the "
         "int8 matmul ceiling on its fastest convolution", "int8_kernels.triton_peak_of_int8_"
         "ceiling_pct", ">=", 50.0, "%", datasets=(*IK, "ceilings"), group=G),
))  # fmt: skip

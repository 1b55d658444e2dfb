"""The articles' quantitative claims (notebook 09), one rule each: a topic's fact where a topic
computes it, else a ``claims.*`` fact. Where a figure is tied to its GPU the rule tests the
mechanism. Claim 1 is fixed by structure: a table, not a rule."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique

G = "claims"
SWEEP = ("sweep_fp16_nhwc",)
NCU_W = ("ncu_width_b8",)

RULES: tuple[Rule, ...] = check_unique((
    Rule("claim_2", "Width x1.5 at batch 8 costs SM occupancy (the article: 92 % -> 48 %): "
         "time-weighted achieved occupancy falls at least 20 points from width 1.0 to 1.5",
         "claims.occupancy_drop_w1_to_w1.5_pp", ">=", 20.0, "pp", datasets=NCU_W, group=G),
    Rule("claim_3", "Width <= 1.25 keeps occupancy above 85 % (time-weighted achieved "
         "occupancy, batch 8, lowest of those widths)", "achieved_occupancy_tw_pct_min", ">",
         85.0, "%", datasets=NCU_W, scope="width<=1.25", group=G),
    Rule("claim_3_w1.5", "Width 1.5 gives about 60 % occupancy (the same claim, second part: "
         "time-weighted achieved occupancy at batch 8 within 5 points of 60 %)",
         "achieved_occupancy_tw_pct_distance_from_60", "<=", 5.0, "points", datasets=NCU_W,
         scope="width=1.5", group=G),
    Rule("claim_3_w1.7", "Above width 1.7 most layers fall below 50 % occupancy (the same "
         "claim, third part: share of layers under that achieved occupancy at batch 8, lowest "
         "of those widths)", "layers_below_50_share_min", ">", 50.0, "%", datasets=NCU_W,
         scope="width>1.7", group=G),
    Rule("claim_4", "FP16 restores occupancy of the wide model by fitting more blocks per SM: "
         "fp16 NHWC convolutions keep more resident blocks per SM than fp32 NCHW ones (width "
         "1.0, batch 8, time-weighted)", "claims.conv_blocks_per_sm_fp16_nhwc_over_fp32_nchw",
         ">", 1.0, "x", datasets=("ncu_precision_w1",), group=G),
    Rule("claim_5", "Batch 4 is the best of batch 1/2/4/8/16 (eager fp16 NHWC, width 1.0: img/s "
         "at batch 4 over the best of them)", "claims.img_per_s_b4_over_best_b1_16", ">=", 1.0,
         "x", datasets=SWEEP, group=G),
    Rule("claim_6", "Kernels under 60 % occupancy waste the GPU: at width 1.0 the time-weighted "
         "tensor-pipe use of YOLOv8's kernels under 60 % theoretical occupancy stays under 30 % "
         "of peak", "roofline.tensor_pipe_pct_below_60_occupancy", "<", 30.0, "%", 50.0,
         ("ncu_throughput_w1",), "width=1.0", G),
    Rule("claim_7", "YOLOv8s batch 1 -> 32 raises FPS 2.7x (147 -> 392 on an A100): eager fp16 "
         "NHWC img/s at width 0.5 at least doubles", "claims.img_per_s_b32_over_b1_w0.5", ">=",
         2.0, "x", 1.2, SWEEP, group=G),
    Rule("claim_8", "One 640x640 image needs ~1.2 GB, the basis of safe batch = floor(0.7 x "
         "memory / per-image memory): measured peak memory per image (eager fp16 NHWC) within "
         "2x of 1.2 GB", "claims.image_memory_off_claim", "<=", 2.0, "x", datasets=SWEEP,
         group=G),
    Rule("claim_9", "FP16 costs under 0.3 % mAP (needs trained weights and a labelled set)",
         "claims.fp16_map_drop_pct", "<", 0.3, "%", group=G),
    Rule("claim_10", "INT8 inference is about 40 % faster than FP16: the INT8 engine's CUDA "
         "graph runs at least 1.3x the img/s of the FP16 CUDA graph timed in the same process, "
         "batch 64, at every width >= 1.0 (smallest ratio)",
         "claims.int8_over_fp16_cudagraph_b64_min", ">=", 1.3, "x", 1.0, ("bench_8bit",),
         group=G),
    Rule("claim_10_fp8", "The same for FP8 (E4M3), the other 8-bit format: the FP8 engine's "
         "CUDA graph runs at least 1.3x the img/s of the FP16 CUDA graph, batch 64, at every "
         "width >= 1.0 where it ran (smallest ratio)", "claims.fp8_over_fp16_cudagraph_b64_min",
         ">=", 1.3, "x", 1.0, ("bench_8bit",), group=G),
    Rule("claim_11", "Fusing YOLOv8's C2f blocks removes over 90 % of kernel launches (share of "
         "a forward's launches that one kernel per C2f block would remove, the most over "
         "widths, eager, batch 8)", "roofline.c2f_fusion_removed_launch_share", ">", 0.9, "",
         datasets=("trace_width_b8",), group=G),
    Rule("claim_12", "Copying one 640x640x3 fp16 frame host-to-device takes ~0.08 ms (within "
         "2x)", "claims.frame_copy_off_claim", "<=", 2.0, "x", datasets=("ceilings",), group=G),
    Rule("claim_13", "Multi-stream pipelining cuts end-to-end latency jitter by 60 % or more "
         "(frames arriving below the pipeline's capacity)",
         "claims.jitter_cut_below_capacity_pct", ">=", 60.0, "%", 0.0, ("bench_fast_engines",),
         group=G),
    Rule("claim_14", "Early ResNet-101 layers are bandwidth-bound, deep layers compute-bound: "
         "the DRAM throughput of each early stage (stem, layer1) and the SM throughput of "
         "each deep stage (layer3, layer4) at 60 % of peak or more (the weakest of them)",
         "claims.resnet_weaker_bound_pct", ">=", 60.0, "%", 40.0,
         ("ncu_resnet101", "model_layers"), group=G),
    Rule("claim_15", "Small PAN-FPN convolutions drop SM utilisation below 20 % (lowest SM "
         "throughput of a neck conv layer, width 1.0)", "claims.neck_conv_sm_throughput_min_pct",
         "<", 20.0, "%", datasets=("ncu_throughput_w1",), group=G),
    Rule("claim_16", "NHWC can beat NCHW (fp16 GPU time per forward at width 1.0, batch 8, NCHW "
         "over NHWC)", "roofline.nchw_time_vs_nhwc", ">", 1.0, "x",
         datasets=("ncu_precision_w1",), scope="precision=fp16", group=G),
))  # fmt: skip

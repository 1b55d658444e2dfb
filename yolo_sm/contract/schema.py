"""Column contracts of the tidy tables: names carry their unit as a suffix (``_ms``, ``_bytes``,
``_pct``, ``_s``); loaders validate at the boundary and name what is missing."""

from __future__ import annotations

from yolo_sm.contract.errors import UserError

# What the host decided of a timed point (sweep and bench engine rows); optional: absent in tables
# measured before they were recorded, where host-boundness falls back to a heuristic
# (yolo_sm.analyse.hostbound.host_bound)
HOST_COLUMNS = {
    "host_cpu_ms": "CPU time of the launching thread per forward over the timed calls "
    "(time.thread_time_ns; issuing only, not the final synchronise), milliseconds",
    "launches_per_forward": "kernel launches, graph launches, memcpys and memsets the host "
    "issued per forward (a short torch.profiler pass; a CUDA graph replay is 1; 0 on a CPU)",
    "kernels_per_forward": "GPU kernels, memcpys and memsets that ran per forward (same pass)",
    "gpu_busy_ms": "sum of those GPU activities' durations per forward, milliseconds",
    "gpu_busy_fraction": "gpu_busy_ms / median_ms: the share of the forward the GPU was busy",
    "host_launch_us": "the host's cost of one eager launch of a tiny kernel in the same process, "
    "right after the point, microseconds (NaN on a CPU): a yardstick of the host's speed",
    "host_bound": "GPU idle above yolo_sm.contract.vocab.HOST_BOUND_IDLE_SHARE of the forward "
    "with more than 2 launches per forward (more than a graph replay and its input copy): the "
    "host set the pace (False on a CPU)",
}

SCHEMAS: dict[str, dict[str, str]] = {
    "sweep": {
        "family": "YOLO family (yolov8, yolo11)",
        "scale": "preset letter (n/s/m/l/x) or empty for a plain width multiplier",
        "width": "width multiplier (ultralytics width_multiple)",
        "depth": "depth multiplier (ultralytics depth_multiple)",
        "max_channels": "ultralytics max_channels cap before width scaling",
        "precision": "fp32 (TF32 off) / tf32 / fp16 / bf16 / int8",
        "layout": "nchw or nhwc (channels_last) for weights and input",
        "backend": "eager / cudagraph / compile / onnxruntime / tensorrt",
        "batch": "images per forward",
        "imgsz": "square input side in pixels",
        "compile_mode": "torch.compile mode (backend compile only)",
        "device": "torch device the point ran on",
        "status": "ok / oom / error",
        "message": "first line of the error for oom/error rows",
        "flops_per_img": "FLOPs per image, 2 per multiply-add (Conv2d/Linear)",
        "median_ms": "median forward latency of one batch, milliseconds (CUDA events)",
        "iqr_ms": "interquartile range of the per-call samples, milliseconds",
        "min_ms": "fastest call, milliseconds",
        "img_per_s": "batch * 1000 / median_ms",
        "tflops": "flops_per_img * batch / median, TFLOP/s",
        "rel_err": "relative L2 error of the raw head output vs eager fp32 on the same input",
        "check_input": "input of the numerical check behind rel_err: photos = ultralytics' bundled "
        "photos, letterboxed (the images the random models' BatchNorm statistics are calibrated "
        "on); off: no check (--check off, rel_err empty); empty or absent: uniform noise (fp8 "
        "engines are always checked on the photos)",
        "samples_ms": "every timed call, milliseconds (list)",
        "noisy": "IQR/median above 10 %",
        "peak_mem_bytes": "peak allocated GPU bytes during the timed calls (weights, input, "
        "activations, workspaces), GPU only. A CUDA graph's activations are not in it: they live "
        "in the graph's private pool (graph_pool_bytes)",
        "graph_pool_bytes": "cudagraph rows: GPU memory the capture reserved beyond the "
        "graph's output tensor (which peak_mem_bytes counts): the private pool that holds its "
        "activations for the graph's lifetime; peak_mem_bytes + graph_pool_bytes is the graph's "
        "footprint (column absent in tables, and empty in rows, measured by yolo_sm before it "
        "recorded the pool)",
        "bn_calibrated": "random-weight model with BatchNorm statistics set from random images "
        "(False: the model's own statistics where model names a checkpoint or a module, else "
        "ultralytics' default init, whose activations vanish in deep layers)",
        "model": "the model spec (family:width, a model .yaml, an ultralytics .pt checkpoint, "
        "package.module:function); family then holds its label. Empty or absent (older tables): "
        "the YOLO family at the row's width",
        **HOST_COLUMNS,
        "quant_convs": "8-bit engine rows (fp8, int8): convolutions quantised (empty otherwise)",
        "quant_fallbacks": "8-bit engine rows: of those, how many cuDNN declined (run in fp16)",
        "quant_handoffs": "int8 engine rows: of those, how many hand their output to the next "
        "int8 convolution in int8 (absent in rows measured before hand-off)",
        "quant_plans_cached": "8-bit engine rows on a GPU: of their cuDNN graphs, how many took "
        "the plan an earlier process tuned from the disk cache instead of tuning (absent in rows "
        "measured before the cache)",
    },
    "ncu": {
        "kernel_id": "order of the kernel in the profiled process",
        "kernel_name": "demangled kernel name",
        "nvtx_path": "NVTX push/pop ranges around the kernel, outermost first",
        "nvtx_range": "innermost NVTX range (the profiled config or layer)",
        "duration_us": "gpu__time_duration.sum, microseconds",
        "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
        "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
        "registers_per_thread": "launch__registers_per_thread",
        "shared_mem_per_block_bytes": "static + dynamic shared memory per block, bytes",
        "block_size": "threads per block",
        "grid_size": "blocks in the grid",
        "waves_per_sm": "launch__waves_per_multiprocessor",
        "limit_registers": "blocks per SM allowed by registers (launch__occupancy_limit_registers)",
        "limit_shared_mem": "blocks per SM allowed by shared memory at the driver's carveout",
        "limit_warps": "blocks per SM allowed by the warp slots",
        "limit_blocks": "blocks per SM allowed by the block slots",
    },
    "kernels": {
        "config": "profiled configuration (family_wWIDTH_precision_layout_bBATCH)",
        "kernel_name": "demangled kernel name",
        "start_us": "kernel start on the trace clock, microseconds",
        "duration_us": "kernel duration, microseconds",
        "grid_size": "blocks in the grid",
        "block_size": "threads per block",
        "registers_per_thread": "registers per thread (CUPTI)",
        "shared_mem_per_block_bytes": "static + dynamic shared memory per block, bytes",
        "est_occupancy_pct": "Kineto's estimate: calculator occupancy capped by grid size",
        "theoretical_occupancy_pct": "yolo_sm.analyse.occupancy for the kernel's launch",
        "limiter": "registers / shared_mem / warps / blocks",
        "waves": "grid_size / (active blocks per SM x SMs)",
        "iteration": "index of the profiled forward",
        "layer": "model layer whose range enclosed the launch ('' when none)",
        "module_type": "ultralytics module type of that layer",
        "stage": "backbone / neck / head",
        "kernel_class": "yolo_sm.analyse.kernels class",
        "unit_s": "wall seconds of the row's config: its engine build and profiled forwards "
        "(the first config of a model includes the model's build; absent in tables made "
        "before configs were timed)",
    },
    "gpm": {
        "t_s": "seconds since the sampler started (end of the window)",
        "window_s": "length of the sampling window, seconds",
        "metric": "sm_occupancy_pct / sm_util_pct / tensor_util_pct / dram_bw_util_pct "
        "(or gpu_util_pct / mem_util_pct from the NVML fallback)",
        "value": "percent over the window",
        "source": "gpm or nvml_util",
    },
    "layers": {
        "config": "family_width_precision_layout_batch label",
        "layer": "ultralytics layer (model.N) or torchvision module path",
        "module_type": "layer class (Conv, C2f, SPPF, Detect, ...)",
        "stage": "backbone / neck / head",
        "kineto_kernels": "kernels per forward in the PyTorch profiler trace",
        "kineto_time_us": "kernel time per forward in the trace, microseconds",
        "kineto_theoretical_occupancy_tw_pct": "time-weighted theoretical occupancy (ours, "
        "from Kineto's launch configuration)",
        "est_occupancy_tw_pct": "time-weighted Kineto 'est. achieved occupancy %' (an estimate)",
        "ncu_kernels": "kernels per forward under Nsight Compute (a separate process)",
        "ncu_time_us": "kernel time per forward under ncu (gpu__time_duration), microseconds",
        "ncu_theoretical_occupancy_tw_pct": "time-weighted sm__maximum_warps_per_active_cycle_pct",
        "ncu_achieved_occupancy_tw_pct": "time-weighted sm__warps_active (achieved occupancy)",
        "kernels_match": "both profilers saw as many kernels in the layer (cuDNN may pick other "
        "algorithms in another process)",
        "gpm_sm_occupancy_pct": "median GPM SM occupancy of the config's run windows (whole GPU)",
    },
    "ceilings": {
        "ceiling": "matmul_<precision> (dense n^3 matmul, the fastest size and kernel), "
        "matmul_<precision>_n<side> (one size), matmul_int8_cudnn_n<side> (the int8 GEMM as "
        "cuDNN's 1x1 convolution), copy_d2d, copy_h2d_pinned, copy_d2h_pinned, "
        "copy_h2d_frame_fp16 (one 640x640x3 fp16 frame from pinned memory)",
        "regime": "burst (a few calls after a rest: the peak the roofline divides by) or "
        "sustained (back to back, the second half of the run: power-limited); absent in tables "
        "measured before the two were told apart (one back-to-back figure: sustained)",
        "value": "the ceiling in unit",
        "unit": "TFLOP/s (2 FLOPs per multiply-add), TOP/s (int8), GB/s (bytes moved: read + "
        "write for d2d) or ms",
        "size": "problem size (matrix side^3 or bytes)",
        "median_ms": "median time of one call, milliseconds (CUDA events)",
        "iqr_ms": "interquartile range of the calls, milliseconds",
        "n_samples": "timed calls",
        "fill": "matmul operands: randn (the ceiling) or zeros (a power diagnostic); absent: randn",
        "kernel": "what ran the matmul (torch.matmul, torch._scaled_mm, torch._int_mm, cuDNN's "
        "int8 1x1 convolution); absent in older tables",
        "sm_clock_mean_mhz": "mean SM clock (NVML, sampled every 5 ms) during the timed calls, MHz",
        "sm_clock_min_mhz": "lowest SM clock read during the timed calls, MHz",
        "power_mean_w": "mean power draw (NVML: instantaneous where the driver reports it, else "
        "its 1 s average, which lags a burst of tens of ms) during the timed calls, W",
        "power_max_w": "highest power draw read during the timed calls, W",
        "power_limit_w": "the GPU's enforced power limit, W",
        "nvml_samples": "NVML readings behind the clock and power figures",
        "sm_clock_end_mhz": "SM clock (NVML) right after the row's timed calls, MHz (absent in "
        "some tables)",
    },
    "probe": {
        "stage": "h2d, letterbox, engine, decode, postprocess (the stages of one batch, each "
        "alone and synchronised); postprocess: fixpoint in torch ops / torchvision nms per "
        "chunk / top-k buffers (the same postprocess with the other NMS paths); letterbox: "
        "compiled / decode: compiled (the two stages as the whole-batch graph runs them; GPU "
        "only); postprocess: top-k in one CUDA graph (the fixed-size NMS, "
        "scaling and packing replayed as one graph; GPU only); batch, 1 "
        "stream / 3 streams (whole batches through DetectionPipeline.run, wall time per batch); "
        "batch, graph, 1 stream / 3 streams (the same with the top-k NMS and everything after "
        "the copy to the device in one CUDA graph per batch in flight; absent in older tables); "
        "batch, graph: its graph's replay alone (that graph's device work of one batch, "
        "letterbox to packed boxes, without the copies; GPU only)",
        "wall_ms": "median host wall time of the stage, milliseconds",
        "gpu_ms": "median CUDA-event time of the stage, milliseconds (empty on a CPU and for "
        "the whole-batch rows)",
        "same_result": "alternative rows (a stage run another way): its result equals the main "
        "row's (postprocess: the same boxes)",
        "family": "YOLO family",
        "width": "width multiplier",
        "batch": "frames per batch",
        "imgsz": "letterboxed side in pixels",
        "engine": "the pipeline's engine (backend/precision/layout)",
        "frames": "bus = every frame the bus photo (1080x810, NMS's worst case); alternate = "
        "bus and zidane (resized) as the bench feeds",
        "reps": "timed repetitions per stage",
        "nms": "the NMS implementation of the postprocess row (yolo_sm.core.nms.NMS_IMPL)",
        "candidates_per_frame": "boxes above the score threshold per frame (NMS's work)",
        "boxes_per_frame": "boxes per frame after NMS",
    },
    "numerics": {
        "input": "random (fresh uniform noise per seed) / photo (ultralytics' bundled photos, "
        "letterboxed, as they are and mirrored)",
        "metric": "rel_err (head output against eager fp32) / boxes (boxes after NMS per photo "
        "against the reference precision's)",
        "family": "YOLO family",
        "width": "width multiplier",
        "precision": "the precision measured (fp32 / fp16 / bf16 / fp8)",
        "reference": "what it is compared with: eager fp32 for rel_err, a precision for boxes",
        "layout": "nchw or nhwc of the measured engine",
        "imgsz": "square input side in pixels",
        "batch": "images per forward",
        "class_prior": "measured on a copy whose class logits carry the fast-engines bench's "
        "prior (yolo_sm.core.bench.CLASS_PRIOR) instead of the model as built",
        "device": "torch device the engines ran on",
        "seed": "seed of the random input (random_input rows)",
        "rel_err": "relative L2 error of the raw head output vs eager fp32 on the same input",
        "tolerance": "the precision's tolerance for rel_err (random_input rows)",
        "frame": "index of the photo (boxes rows)",
        "boxes": "boxes after NMS of the measured precision (boxes rows)",
        "reference_boxes": "boxes after NMS of the reference precision (boxes rows)",
        "matched": "share of boxes with a same-class reference box at IoU >= 0.9",
        "reference_matched": "share of reference boxes with a same-class partner at IoU >= 0.9",
        "fp8_kernel": "fp8 rows: emulate (exact E4M3 rounding in float arithmetic, CPU) or cudnn "
        "(cuDNN FP8 convolutions, GPU)",
        **{
            "calibration": "int8 rows: how activation ranges were calibrated on the photos (max "
            "= max |x|, percentile = the int8_percentile-th percentile of |x|); empty otherwise",
            "int8_percentile": "percentile rows: the percentile of |x| that sets the range",
            "int8_kernel": "int8 rows: emulate (int8 values convolved in fp32, CPU) or cudnn "
            "(cuDNN INT8 convolutions with int32 accumulation, GPU)",
            "quant_convs": "int8 photo rows: convolutions quantised to int8",
            "quant_fallbacks": "int8 photo rows: of those, how many cuDNN declined (run in fp16)",
            "unfused_convs": "int8 photo rows: int8 convolutions whose epilogue (de-scale, bias, "
            "SiLU) ran in torch after the cuDNN graph instead of fused into it",
        },
    },
    "bench": {
        **HOST_COLUMNS,
        "family": "YOLO family (yolov8, yolo11), or the label of a model given as a file",
        "width": "width multiplier (depth 0.33, max_channels 2048)",
        "batch": "images (frames) per forward",
        "model": "the model spec: family:width, or a model .yaml / ultralytics .pt (absent in "
        "older tables)",
        "variant": "backend[:compile mode]/precision/layout of an engine (eager/fp16/nhwc is the "
        "baseline), pipeline/<engine>[/<pipeline mode>]/s<streams>, or ultralytics_predict",
        "scope": "model_only (the forward alone, CUDA events) or frames_to_boxes (uint8 frames "
        "in, NMS-ed boxes on the host out, wall clock per batch)",
        "backend": "eager / cudagraph / compile / ... (ultralytics for the predict rows)",
        "compile_mode": "torch.compile mode (compile rows only)",
        "precision": "fp32 / fp16 / bf16 / fp8 / int8 of the engine",
        "layout": "nchw or nhwc",
        "streams": "batches in flight of a pipeline row (each with its own copy stream, behind "
        "one compute and one post-processing stream); a CPU pipeline runs one whatever this says",
        "pipeline_mode": "pipeline rows: full (the full NMS), topk (the fixed-size NMS on each "
        "frame's k best candidates first, the full one for a batch where that is not exact) or "
        "graph (topk, with everything after the copy to the device - letterbox, the engine's "
        "forward, decode, NMS, the boxes packed - in one CUDA graph per batch in flight); empty "
        "or absent in rows measured before the modes (full)",
        "pinned": "pipeline rows: the frames sat in pinned host memory and went straight to the "
        "device (False: a host copy into the pipeline's pinned buffer per batch; always False "
        "on a CPU; empty or absent in rows measured before the overlapping pipeline)",
        "nms": "pipeline rows: the NMS implementation (nms_matrix_fixpoint = every image and "
        "class at once, a fixed point over an overlap matrix; nms_f64_offsets_chunked = "
        "torchvision nms over offset (image, class) groups, one call per chunk of whole images; "
        "nms_f64_offsets = one such call for the whole batch; torchvision_batched_nms = the "
        "earlier per-group loop; a suffix +top<k>: first the fixed-size NMS on each frame's k "
        "best candidates, the named one for a batch where that is not exact)",
        "candidates_per_frame": "pipeline rows: boxes above the score threshold per frame, what "
        "NMS works on (its cost grows with it); absent in some rows",
        "boxes_per_frame": "pipeline rows: boxes per frame after NMS",
        "status": "ok / oom / error (an engine that cannot run here is an error row)",
        "message": "one line saying why, for oom/error rows",
        "median_ms": "median (p50) latency of one batch, milliseconds",
        "iqr_ms": "interquartile range of the per-call samples, milliseconds (engine rows)",
        "p99_ms": "99th percentile latency of one batch, milliseconds",
        "img_per_s": "images (frames) per second",
        "vs_baseline": "img_per_s over the baseline's (eager/fp16/nhwc) of the same family, "
        "width and batch, measured in the same unit of the run",
        "n_samples": "timed calls (engine rows) or batches (pipeline and predict rows)",
        "noisy": "IQR/median above 10 % (engine rows)",
        "rel_err": "relative L2 error of the raw head output vs eager fp32 (engine rows)",
        "check_input": "engine rows: input of the numerical check behind rel_err (photos; empty "
        "or absent: uniform noise; fp8 engines always on the photos)",
        "tflops": "flops_per_img * batch / median, TFLOP/s (engine rows)",
        "flops_per_img": "FLOPs per image, 2 per multiply-add (Conv2d/Linear)",
        "peak_mem_bytes": "peak allocated GPU bytes of one call of the engine, less what the "
        "unit's other engines held (engine rows, GPU)",
        "rounds": "engine rows: interleaved rounds the unit's engines were timed in (each round "
        "times every engine in turn; median_ms is the median of the rounds' medians); absent "
        "in rows measured one engine after the other",
        "round_ms": "engine rows: each round's median latency, milliseconds",
        "round_sm_clock_mhz": "engine rows: the SM clock read after each round's calls, MHz "
        "(NaN without NVML, e.g. a CPU)",
        "round_spread_pct": "engine rows: (max - min) of round_ms over median_ms, %",
        "sm_clock_mhz": "engine rows: the median of round_sm_clock_mhz, MHz",
        "build_s": "seconds to build the engine: export, compile or graph capture, and the "
        "numerical check (engine and pipeline rows)",
        "compile_s": "torch.compile's share of build_s (compile rows)",
        "compile_first_s": "the first compiling call's share of compile_s: dynamo's trace and "
        "inductor's compile; the later calls run the compiled graph, and reduce-overhead "
        "records its CUDA graphs there (compile rows; absent in rows measured before it)",
        "capture_s": "CUDA graph capture's share of build_s (cudagraph rows)",
        "model_only_img_per_s": "img/s of the pipeline's own engine instance timed model-only "
        "at the same batch, just before the pipeline ran (pipeline rows; graph-mode rows: its "
        "forward as the pipeline's graph runs it, captured in a CUDA graph and replayed)",
        "pipeline_vs_model_only": "pipeline frames/s over model_only_img_per_s (1.0: the "
        "pipeline adds nothing to the forward; pipeline rows)",
        **{
            "quant_convs": "8-bit engine rows (fp8, int8): convolutions quantised (empty for the "
            "other engines)",
            "quant_fallbacks": "8-bit engine rows: of those, how many cuDNN declined (they ran "
            "in fp16)",
            "quant_handoffs": "int8 engine rows: of those, how many hand their output to the "
            "next int8 convolution in int8 (absent in rows measured before hand-off)",
            "quant_plans_cached": "8-bit engine rows on a GPU: of their cuDNN graphs, how many "
            "took the plan an earlier process tuned from the disk cache instead of tuning "
            "(absent in rows measured before the cache)",
        },
        "unit_s": "wall time of the (family, width, batch) unit the row was measured in, "
        "seconds (what a resumed run uses to decide whether the next unit fits)",
    },
    "gpm_overhead": {
        "config": "config the throughput was measured on",
        "round": "pair number (sampler on and off in alternating order)",
        "sampler": "GPM sampler running during the round",
        "hz": "sampler polling rate",
        "forwards": "forwards completed in the round",
        "seconds": "round wall time",
        "img_per_s": "images per second in the round",
    },
    "model_tables": {
        "model": "yolov8 / yolo11 (YOLO family at a width), resnet101 (the ResNet detector) or "
        "wide (the wide conv stack)",
        "family": "model family as profiling configs name it (yolov8, resnet101, wide)",
        "width": "width multiplier (YOLO) or width factor (wide); 1.0 for ResNet",
        "depth": "depth multiplier (YOLO only; empty otherwise)",
        "max_channels": "ultralytics max_channels cap before width scaling (YOLO only)",
        "imgsz": "square input side in pixels",
        "batch": "images the byte columns count (1: per image)",
        "bytes_per_element": "bytes per tensor element the byte columns count (2: fp16/bf16)",
        "index": "layer position in forward order",
        "layer": "layer name as the profilers name it (model.N, layer3, blocks.N)",
        "module_type": "layer class (Conv, C2f, SPPF, Detect, Sequential, WideConvBlock, ...)",
        "stage": "backbone / neck / head (wide stack: stage0-3)",
        "in_channels": "channels of the layer's 4-D inputs, summed",
        "out_channels": "channels of the layer's output(s), summed",
        "requested_channels": "YAML channels x width before the max_channels cap and the "
        "rounding to a multiple of 8 (YOLO layers with a channel argument; empty otherwise)",
        "rounded": "the real width differs from the capped request: rounded up to a multiple of 8",
        "capped": "max_channels lowered this layer's channels",
        "stride": "input side / output side",
        "out_h": "output height in pixels (empty for the head's flat outputs)",
        "out_w": "output width in pixels",
        "params": "parameters of the layer (BN folded)",
        "flops": "FLOPs per image, 2 per multiply-add of every Conv2d and Linear",
        "weight_bytes": "the layer's weights, bytes (read once per forward)",
        "in_bytes": "the layer's 4-D inputs per image, bytes",
        "out_bytes": "the layer's output activation per image, bytes",
        "min_bytes": "weight_bytes + in_bytes + out_bytes: what a fully fused layer moves",
        "conv_io_bytes": "inputs plus outputs of every Conv2d/Linear inside the layer, per image, "
        "bytes",
        "conv_weight_bytes": "weights of those convolutions, bytes (once per forward)",
        "conv_bytes": "conv_io_bytes + conv_weight_bytes: what unfused convolutions move",
    },
}


# Columns every table of a kind must have (the others in SCHEMAS are described when present:
# e.g. an ncu table collected with the "throughput" metric set has no occupancy columns).
REQUIRED = {
    # check_input: absent in sweeps measured before the check moved to the photos; model:
    # absent in sweeps measured before model specs
    "sweep": tuple(
        c
        for c in SCHEMAS["sweep"]
        if c not in ("peak_mem_bytes", "check_input", "graph_pool_bytes", "model", *HOST_COLUMNS)
        and c not in ("quant_convs", "quant_fallbacks", "quant_handoffs", "quant_plans_cached")
    ),
    "ncu": ("kernel_id", "kernel_name", "nvtx_path", "nvtx_range", "duration_us"),
    "kernels": tuple(
        (
            "kernel_name start_us duration_us grid_size block_size registers_per_thread "
            "shared_mem_per_block_bytes est_occupancy_pct theoretical_occupancy_pct limiter "
            "waves layer stage kernel_class"
        ).split()
    ),
    "gpm": tuple(SCHEMAS["gpm"]),
    "layers": ("config", "layer", "module_type", "stage", "kineto_time_us", "ncu_time_us"),
    "gpm_overhead": tuple(SCHEMAS["gpm_overhead"]),
    "ceilings": ("ceiling", "value", "unit", "median_ms"),
    "model_tables": tuple(
        (
            "model family width imgsz batch bytes_per_element index layer module_type stage "
            "params flops weight_bytes in_bytes out_bytes min_bytes conv_io_bytes "
            "conv_weight_bytes conv_bytes"
        ).split()
    ),
    "probe": ("stage", "wall_ms", "gpu_ms", "width", "batch", "engine", "candidates_per_frame"),
    "numerics": ("input", "metric", "family", "width", "precision", "reference", "imgsz", "device"),
    "bench": tuple(
        (
            "family width batch variant scope status message median_ms p99_ms img_per_s vs_baseline"
        ).split()
    ),
}


# --- techniques (yolo_sm.topics.techniques.collect): fusion, autocast, batch buffer
# -----------------
SCHEMAS["techniques"] = {
    "technique": "fusion (ResNet detector: BN kept / BN folded / conv + bias + ReLU fused), "
    "autocast (fp32 model under torch.autocast vs the model cast to the 16-bit type), "
    "autocast_dtypes (per module type, the output dtypes of one autocast forward), "
    "batch_buffer (a batch assembled by a new torch.stack per step vs into a buffer allocated "
    "once)",
    "model": "the model (resnet101, yolov8:WIDTH)",
    "family": "model family (resnet101, yolov8)",
    "width": "width multiplier (1.0 for ResNet)",
    "variant": "fusion: bn_unfused / bn_folded (fuse_conv_bn_eval) / conv_bias_relu (bias, "
    "residual add and ReLU in the convolution's cuDNN call: torch.cudnn_convolution_relu and "
    "cudnn_convolution_add_relu); autocast: autocast / half_model; batch_buffer: stack_new / "
    "prealloc_copy (one copy_ per frame into the buffer) / prealloc_stack_out "
    "(torch.stack(out=buffer))",
    "backend": "eager / cudagraph (one CUDA graph of the forward); none for assembly rows",
    "scope": "forward (the model alone), assembly (the batch's assembly alone), step (assembly "
    "then forward), dtypes (autocast_dtypes rows)",
    "batch": "images per forward (frames per batch)",
    "imgsz": "square input side in pixels",
    "precision": "the 16-bit type: fp16 on a GPU, bf16 on a CPU (autocast's target type, the "
    "half model's type, the frames' type)",
    "layout": "nhwc (channels-last weights and inputs)",
    "device": "torch device the rows ran on",
    "status": "ok / oom / error (error also when rel_err exceeds the precision's tolerance)",
    "message": "first line of the error",
    "median_ms": "median time of one call (forward, assembly or step), milliseconds",
    "iqr_ms": "interquartile range of the per-call samples, milliseconds",
    "min_ms": "fastest call, milliseconds",
    "mean_ms": "mean call, milliseconds",
    "p99_ms": "99th percentile call, milliseconds",
    "img_per_s": "batch * 1000 / median_ms",
    "n_samples": "timed calls",
    "warmup_calls": "calls before the timed ones",
    "noisy": "IQR/median above 10 %",
    "l2_flush": "L2 flushed before each timed call (never here)",
    "samples_ms": "every timed call, milliseconds (list)",
    "host_cpu_ms": HOST_COLUMNS["host_cpu_ms"],
    "rel_err": "relative L2 error of the head output vs the eager fp32 model (fusion: the "
    "unfused one) on ultralytics' bundled photos; the half model sees them rounded to 16 bits",
    "kernels_per_forward": "GPU kernels per call in a Kineto pass (eager fusion and autocast "
    "rows: a CUDA graph replays the same kernels; assembly rows: kernels, memcpys and memsets "
    "of a torch.profiler pass; empty on a CPU)",
    "kernel_time_ms": "summed kernel time per call in that pass, milliseconds",
    "elementwise_kernels_per_forward": "elementwise kernels per call (yolo_sm.analyse.kernels "
    "class elementwise: bias and residual adds, activations, eval BatchNorm, casts)",
    "elementwise_time_pct": "share of kernel time in elementwise kernels, percent",
    "copy_time_pct": "share of kernel time in copy/concat kernels (autocast's weight casts "
    "among them), percent",
    "matrix_time_pct": "share of kernel time in convolution and GEMM kernels, percent",
    "launches_per_forward": HOST_COLUMNS["launches_per_forward"] + " (assembly rows)",
    "gpu_busy_ms": HOST_COLUMNS["gpu_busy_ms"] + " (assembly rows)",
    "bn_modules": "BatchNorm2d modules left in the fusion variant's model",
    "fused_conv_modules": "convolutions that apply bias + ReLU (+ residual add) in their cuDNN "
    "call (yolo_sm.core.models.fused)",
    "static_buffer": "batch_buffer rows: the batch lands in a buffer allocated once (False: a "
    "new tensor per step)",
    "graph_input_copy": "batch_buffer step rows: the assembled batch is copied into the CUDA "
    "graph's static input before the replay (a graph reads one static buffer: stack_new pays "
    "one more copy; the prealloc variants write into the graph's input itself)",
    "module_type": "autocast_dtypes rows: module class (Conv, Conv2d, C2f, SiLU, Detect, ...)",
    "calls": "autocast_dtypes rows: calls of modules of that type in one forward",
    "fp32_output_calls": "of those, calls whose output was float32 under autocast",
    "upcast_calls": "of those, calls with a 16-bit input and a float32 output (autocast ran "
    "the op in fp32)",
}
REQUIRED["techniques"] = tuple(
    "technique model variant backend scope batch precision device status message".split()
)

# --- model shapes and input shapes (collect.wide_deep, collect.resolutions) ------------------
OCCUPANCY_PASS = {
    "kineto_kernels_per_forward": "GPU kernels per forward in a short Kineto pass after the "
    "timed calls (3 forwards)",
    "kineto_kernel_us": "their summed duration per forward, microseconds",
    "est_occupancy_tw_pct": "Kineto's estimated achieved occupancy (calculator occupancy capped "
    "by grid size) averaged over the pass's kernels, weighted by kernel time",
    "theoretical_occupancy_tw_pct": "theoretical occupancy of the kernels' launch "
    "configurations, weighted by kernel time",
}
SCHEMAS["wide_vs_deep"] = {
    **SCHEMAS["sweep"],
    "pair": "index of the FLOPs-matched pair (two models of nearly equal FLOPs per image)",
    "role": "wide (larger width multiplier, smaller depth) or deep (narrower, deeper)",
    "match_rel_diff": "the deep model's FLOPs per image over the wide one's, minus 1 (0 on the "
    "wide model's rows)",
    **OCCUPANCY_PASS,
}
SCHEMAS["resolutions"] = {
    "family": "YOLO family",
    "width": "width multiplier",
    "depth": "depth multiplier",
    "batch": "images per forward",
    "precision": "fp16 / bf16 / fp32 ...",
    "layout": "nchw or nhwc (channels_last)",
    "device": "torch device the row ran on",
    "frame_size": "camera frame size WIDTHxHEIGHT the engine size is letterboxed from",
    "frame_w": "frame width, pixels",
    "frame_h": "frame height, pixels",
    "imgsz_h": "engine input height, pixels (the frame's height rounded up to a multiple of 32)",
    "imgsz_w": "engine input width, pixels",
    "engine": "fixed (an engine built for this one input shape) or dynamic (one engine that "
    "serves every shape of the table)",
    "backend": "fixed: cudagraph (or eager / compile); dynamic: eager (the module itself) or "
    "compile (torch.compile with dynamic=True)",
    "status": "ok / oom / error",
    "message": "first line of the error for oom/error rows",
    "build_s": "seconds to build the engine at this shape (a dynamic engine: its first call at "
    "this shape, with the numerical check)",
    "rel_err": "relative L2 error of the head output vs eager fp32 on the letterboxed photos",
    "median_ms": "median forward latency of one batch, milliseconds (CUDA events)",
    "iqr_ms": "interquartile range of the per-call samples, milliseconds",
    "img_per_s": "batch * 1000 / median_ms",
    "mpix_per_s": "img_per_s x engine input pixels / 1e6: megapixels of model input per second",
    "samples_ms": "every timed call, milliseconds (list)",
    "noisy": "IQR/median above 10 %",
    "recompiles": "compile engine: graphs dynamo compiled since the engine's first call at this "
    "shape (0: the dynamic graph served it)",
    "first_call_s": "dynamic engines: seconds of the first call at this shape (a compile "
    "engine's compilation at the first shape)",
    **HOST_COLUMNS,
}
REQUIRED["wide_vs_deep"] = (*REQUIRED["sweep"], "pair", "role")
REQUIRED["resolutions"] = tuple((
"family width batch frame_size imgsz_h imgsz_w engine backend status message "
"img_per_s mpix_per_s"
).split())  # fmt: skip

# --- two models sharing one GPU (collect.sharing) ------------------------------------------
SCHEMAS["sharing"] = {
    "pair": "the two engines of the pair, WIDTHxBATCH+WIDTHxBATCH (engine a first)",
    "mode": "alone_a / alone_b (one engine alone), streams (both in one process, each on its "
    "own CUDA stream), processes (each in its own process, started together)",
    "engine": "a or b: which engine of the pair the row measures",
    "config": "the engine's family_width_precision_layout_batch label",
    "family": "YOLO family",
    "width": "width multiplier",
    "batch": "images per forward",
    "precision": "engine precision",
    "layout": "nchw or nhwc",
    "backend": "engine backend (cudagraph: one CUDA graph replayed per batch)",
    "imgsz": "square input side in pixels",
    "depth": "batches each engine kept in flight on its stream",
    "batches": "batches that started and ended inside the measured window",
    "window_s": "the measured window: from the last engine's first start to the first "
    "engine's last end (CUDA events; alone: the engine's own first start to last end), seconds",
    "img_per_s": "batches * batch / window_s",
    "p50_ms": "median GPU time of a batch on its stream, start to end event, milliseconds "
    "(queueing on the host not included)",
    "p99_ms": "99th percentile of the same, milliseconds",
    "mean_ms": "mean of the same, milliseconds",
    "mps_used": "whether the CUDA MPS server shared the GPU (never: the machine's settings are "
    "left as they are)",
    "mig_used": "whether the engines ran in MIG slices (never, for the same reason)",
    "mps_server": "running / not running: an MPS control pipe was found (CUDA_MPS_PIPE_DIRECTORY "
    "or /tmp/nvidia-mps) when the step ran",
    "mig_mode": "the GPU's MIG mode as NVML read it (enabled / disabled / unsupported)",
    "compute_mode": "the GPU's compute mode as NVML read it (default / exclusive_process / "
    "prohibited / unknown)",
}
SCHEMAS["sharing_kernels"] = {
    "pair": "the two engines of the pair (engine a first)",
    "mode": "alone_a / alone_b / streams: the run the short PyTorch-profiler capture covered",
    "engine": "a or b",
    "kernel_class": "yolo_sm.analyse.kernels class",
    "kernels": "kernels of the class the engine ran in the capture",
    "time_us": "their summed duration, microseconds",
    "batches": "the engine's graph replays in the capture",
    "time_us_per_batch": "time_us / batches, microseconds",
    "time_share": "time_us over the engine's kernel time in the capture",
    "overlap_us": "of time_us, the time during which a kernel of the other engine ran too "
    "(streams only; 0 alone), microseconds",
    "overlap_share": "overlap_us / time_us",
}
REQUIRED["sharing"] = tuple(
    "pair mode engine config width batch batches img_per_s p50_ms p99_ms".split()
)
REQUIRED["sharing_kernels"] = tuple(
    "pair mode engine kernel_class kernels time_us batches time_share overlap_us".split()
)
SCHEMAS["gpm"]["power_w"] = "board power draw over the window (nvmlDeviceGetPowerUsage), watts"

# Nsight Compute "stalls" metric set (collect.profiling.ncu)
SCHEMAS["ncu"].update(
    {
        "local_load_sectors": "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum: local-memory "
        "(register spill) load sectors",
        "local_store_sectors": "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum: local-memory "
        "store sectors",
        "threads_per_instruction": "smsp__thread_inst_executed_per_inst_executed.ratio: active "
        "threads per executed warp instruction (32 at most)",
        "warp_execution_efficiency_pct": "threads_per_instruction / 32, percent",
        "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
        "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
        "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active: cycles in "
        "which a scheduler issued an instruction",
    }
)


# Where a row was measured, recorded by `collect --workers` / `--scheduler` (absent in tables of
# plain runs); optional in every kind (described in SCHEMAS, never in REQUIRED), so that views
# can compare only same-GPU points
PLACE = {
    "gpu_uuid": "UUID of the GPU the row was measured on (GPU-..., as nvidia-smi prints it); "
    "empty on a CPU",
    "gpu_index": "index of that GPU on its host (nvidia-smi's numbering); empty on a CPU",
    "host": "host name of the machine that measured the row",
    "worker": "name of the Dask worker that measured the row",
}
PLACE_COLUMNS = tuple(PLACE)
for _columns in SCHEMAS.values():
    for _c, _text in PLACE.items():
        _columns.setdefault(_c, _text)


#: column types every table is checked for (columns not named here are not checked):
#: text (strings), flag (booleans), list (one list per row), number (ints or floats; the
#: default for a name ending in a unit suffix). An all-empty column passes every type.
TEXT = frozenset(
    "family scale precision layout backend compile_mode device status message check_input "
    "kernel_name nvtx_path nvtx_range config limiter layer module_type stage kernel_class "
    "metric source ceiling unit engine frames nms input reference fp8_kernel variant scope "
    "calibration int8_kernel pair mode mps_server mig_mode compute_mode "
    "model size phase capture kineto_main_limiter grid block role frame_size".split()
)
FLAG = frozenset(
    "noisy bn_calibrated kernels_match rounded capped same_result class_prior pinned sampler "
    "straddles_mark l2_flush mps_used mig_used".split()
)
LIST = frozenset({"samples_ms", "round_ms", "round_sm_clock_mhz"})
NUMBER = frozenset(
    "width depth max_channels batch imgsz flops_per_img tflops rel_err kernel_id "
    "registers_per_thread block_size grid_size waves_per_sm limit_registers limit_shared_mem "
    "limit_warps limit_blocks waves iteration kineto_kernels ncu_kernels value n_samples "
    "streams vs_baseline index in_channels out_channels requested_channels stride out_h out_w "
    "params flops bytes_per_element round hz forwards seconds seed tolerance frame boxes "
    "reference_boxes matched reference_matched reps boxes_per_frame candidates_per_frame "
    "pipeline_vs_model_only recompiles graphs_compiled warmup_calls correlation stream "
    "sm_coverage_tw tensor_core_time_share ncu_time_share "
    "quant_convs quant_fallbacks quant_handoffs quant_plans_cached unfused_convs int8_percentile "
    "match_rel_diff frame_w frame_h imgsz_h imgsz_w kineto_kernels_per_forward "
    "batches kernels time_share overlap_share local_load_sectors local_store_sectors "
    "threads_per_instruction".split()
)
TEXT |= {"technique"}  # techniques
FLAG |= {"static_buffer", "graph_input_copy"}  # techniques
FLAG |= {"warmup_settled"}  # collect.timing.Settle
NUMBER |= {"rounds"}  # collect.timing.measure_rounds
NUMBER |= {"calls", "fp32_output_calls", "upcast_calls", "bn_modules", "fused_conv_modules"}
UNIT_SUFFIXES = ("_ms", "_us", "_s", "_pct", "_bytes", "_mhz", "_per_s")
#: per kind, columns whose type differs from the name's usual one
KIND_TYPES = {
    "kernels": {"device": "number"},  # the CUDA device index of a trace event
    "wide_vs_deep": {"pair": "number"},  # the pair's index (a sharing pair is its text)
}


def column_type(kind: str, column: str) -> str | None:
    """The type ``column`` of a ``kind`` table must have (text / flag / list / number), or
    None when it is not checked."""
    if column in KIND_TYPES.get(kind, {}):
        return KIND_TYPES[kind][column]
    if column.startswith("prov_"):
        return None
    for name, group in (("text", TEXT), ("flag", FLAG), ("list", LIST), ("number", NUMBER)):
        if column in group:
            return name
    return "number" if column.endswith(UNIT_SUFFIXES) else None


def _type_ok(series, want: str) -> bool:
    import numpy as np
    import pandas as pd
    from pandas.api import types as t

    values = series.dropna() if want != "list" else series[series.map(lambda v: v is not None)]
    if values.empty:
        return True
    if want == "number":
        return t.is_numeric_dtype(series) and not t.is_bool_dtype(series)
    if want == "flag":
        return t.is_bool_dtype(series) or all(isinstance(v, (bool, np.bool_)) for v in values)
    if want == "text":
        return t.is_string_dtype(series) and all(isinstance(v, str) for v in values)
    return all(isinstance(v, (list, tuple, np.ndarray, pd.Series)) for v in values)


#: kinds whose tables may hold no rows: a PyTorch trace on a CPU has no GPU kernels
EMPTY_OK = frozenset({"kernels"})
EMPTY_OK |= {"sharing_kernels"}  # the sharing step's traces: none on a CPU


def problems(df, kind: str) -> list[str]:
    """What is wrong with ``df`` as a ``kind`` table: missing required columns, columns of the
    wrong type (:func:`column_type`), no rows (except the kinds of :data:`EMPTY_OK`)."""
    if kind not in REQUIRED:
        return [f"unknown table kind {kind!r}"]
    out = []
    missing = [c for c in REQUIRED[kind] if c not in df.columns]
    if missing:
        out.append(f"lacks required column(s): {', '.join(missing)}")
    wrong = wrong_types(df, kind)
    if wrong:
        out.append(f"has column(s) of the wrong type: {', '.join(wrong)}")
    if not len(df) and kind not in EMPTY_OK:
        out.append("holds no rows")
    return out


def wrong_types(df, kind: str) -> list[str]:
    """The columns of ``df`` whose type is not what a ``kind`` table holds (:func:`column_type`),
    each as ``name (dtype, expected type)``."""
    out = []
    for c in df.columns:
        want = column_type(kind, str(c))
        if want and not _type_ok(df[c], want):
            out.append(f"{c} ({df[c].dtype}, expected {want})")
    return out


class TableError(UserError):
    """A table that is not what its kind promises (a UserError, hence a ValueError, naming
    the table, its file and what is wrong)."""


def validate(df, kind: str, name: str | None = None, source=None):
    """Raise :class:`TableError` (a UserError, so one sentence in the CLI) naming the table,
    its file (``source``) and what is wrong (:func:`problems`); returns ``df``."""
    found = problems(df, kind)
    if found:
        where = f" ({source})" if source else ""
        raise TableError(f"{name or kind} table{where} " + "; ".join(found))
    return df


# the columns that name a sweep point (a resumed sweep skips points whose key it holds)
KEY_COLUMNS = tuple(
    (
        "family scale width depth max_channels precision layout backend batch imgsz "
        "compile_mode device"
    ).split()
)


# --- wall seconds per phase and torch.compile's disk cache ------------------------------------
# (yolo_sm.core.stopwatch, yolo_sm.core.engines.compile_cache); optional in sweep and
# bench tables: absent in tables measured before they were recorded
PHASE_SECONDS = {
    "warmup_s": "wall seconds of the estimate and warm-up calls before the timed calls",
    "warmup_settled": "on a GPU, whether the warm-up ended with the per-call time and the SM "
    "clock settled (yolo_sm.core.timing.Settle) rather than at its cap; empty where a fixed "
    "warm-up ran (a CPU) or in rows measured before the rule",
    "timed_s": "wall seconds of the timed calls (with the clock and provenance reads around "
    "them; a pipeline or predict row: its timed run)",
    "profile_s": "wall seconds of the profiler pass after the timed calls (the host columns)",
    "compile_cache": "compile rows: what the build found in inductor's disk cache: warm (every "
    "graph read from it), cold (every graph compiled afresh) or partial (some graphs read, or "
    "every graph compiled but some or all of a max-autotune mode's autotuning read from the "
    "cache)",
    "autotuned_ops": "max-autotune compile rows: ops whose choices the build benchmarked "
    "afresh rather than read from inductor's autotune cache (empty for other modes)",
    "autotune_reads": "max-autotune compile rows: lookups of inductor's autotune cache that "
    "read an op's timings from disk instead of benchmarking its choices (empty for other modes)",
}
for _kind in ("sweep", "bench"):
    for _c, _text in PHASE_SECONDS.items():
        SCHEMAS[_kind].setdefault(_c, _text)
SCHEMAS["sweep"].setdefault(
    "build_s", "wall seconds to build and check the engine (export, compile or capture)"
)
SCHEMAS["compile_cache"] = {
    "family": "YOLO family",
    "width": "width multiplier",
    "batch": "images per forward",
    "imgsz": "square input side in pixels",
    "precision": "engine precision",
    "layout": "nchw or nhwc",
    "device": "torch device",
    "compile_mode": "torch.compile mode",
    "run": "order of the build against its cache folder (1: the folder was empty)",
    "cache": "the planned cache state: cold (a new, empty folder) or warm (the folder the "
    "cold build filled), each build in its own fresh process",
    "status": "ok / oom / error",
    "message": "first line of the error for oom/error rows",
    "compile_cache": "what the build found (inductor's FX graph cache counters, and for a "
    "max-autotune mode its autotune counter and autotune-cache reads): warm, cold or partial",
    "compile_s": "seconds of the compiling calls (torch.compile's build)",
    "build_s": "seconds to build the engine: compile and the numerical check",
    "process_s": "wall seconds of the whole build process (start, imports, build, timing)",
    "unit_s": "wall seconds of the row's (width, mode) unit: its cold and warm builds",
    "img_per_s": "images per second of the compiled engine (batch * 1000 / median_ms)",
    "median_ms": "median forward latency of one batch, milliseconds (CUDA events)",
    "iqr_ms": "interquartile range of the per-call samples, milliseconds",
    "rel_err": "relative L2 error of the head output vs eager fp32",
    "fx_cache_hits": "FX graph cache hits during the build",
    "fx_cache_misses": "FX graph cache misses during the build",
    "cache_files_before": "files in the cache folder before the build",
    "cache_files_after": "files in the cache folder after the build",
    "graphs_compiled": "graphs dynamo compiled during the build",
    **{k: v for k, v in PHASE_SECONDS.items() if k != "compile_cache"},
}
REQUIRED["compile_cache"] = tuple(
    "family width batch compile_mode run cache status message".split()
)
TEXT = TEXT | {"cache", "compile_cache"}
NUMBER = NUMBER | {*(
"run fx_cache_hits fx_cache_misses cache_files_before cache_files_after "
"autotuned_ops autotune_reads"
).split()}  # fmt: skip

# --- activation lifetimes and the caching allocator's pool (collect.memory) -----------------
SCHEMAS["memory_lifetimes"] = {
    "model": "yolov8 / yolo11 (YOLO family at a width) or resnet101 (the ResNet detector)",
    "family": "model family (yolov8, resnet101)",
    "width": "width multiplier (1.0 for ResNet)",
    "batch": "images per forward",
    "imgsz": "square input side in pixels",
    "precision": "precision of weights and activations (fp16, fp32, ...)",
    "layout": "nchw or nhwc (channels_last) for weights and input",
    "device": "torch device the forward ran on",
    "level": "model (one summary row per model), layer (one row per layer in forward order: a "
    "YOLO model.N, a ResNet residual block) or tensor (one row per activation: a new storage "
    "an ATen op returned)",
    "index": "layer rows: position in forward order; tensor rows: creation order; model: 0",
    "layer": "layer name (model.N, layer3.7); tensor rows: the layer that created it",
    "layer_index": "position of that layer in forward order",
    "module_type": "layer class (Conv, C2f, Concat, Bottleneck, ...); tensor rows: the ATen op "
    "that created it; model rows: the model class",
    "stage": "backbone / neck / head (layer rows)",
    "from_layers": "layer rows: the layers it reads (ultralytics' f; -1 the previous one)",
    "out_bytes": "layer rows: bytes of the layer's output tensors; tensor rows: the storage's "
    "bytes; model rows: every activation of the forward summed (no reuse)",
    "created_at_step": "layer rows: the layer's position; tensor rows: the op step that created "
    "it (ATen ops numbered from 0 in forward order)",
    "freed_after_step": "last use: layer rows, the position of the last layer that reads the "
    "output (the layer's own if none; the last layer for the model's output); tensor rows, the "
    "last op step that reads its storage through any view",
    "held_until_step": "release: the step (layer position or op step, as created_at_step) "
    "after which eager PyTorch freed the storage (Python references included); the last step "
    "for tensors alive when the forward returned",
    "lifetime_steps": "freed_after_step - created_at_step (layers or ops)",
    "last_use_layer": "tensor rows: position of the layer whose op used it last",
    "transient_bytes": "tensor rows: bytes the op that created it allocated and freed again "
    "before returning (cuDNN workspaces, internal temporaries): its peak allocated minus "
    "allocated after it (NaN without a GPU)",
    "live_bytes_after": "layer rows: bytes of the layer outputs so far whose last consumer "
    "comes after this layer",
    "held_bytes_after": "layer rows: bytes of the layer outputs so far not yet released after "
    "this layer",
    "measured_allocated_bytes": "layer rows: torch.cuda.memory_allocated after the layer minus "
    "before the forward, bytes (NaN without a GPU)",
    "measured_peak_bytes": "layer rows: peak allocated during the layer minus before the "
    "forward; model rows: torch.cuda.max_memory_allocated of one untraced forward (weights and "
    "input included), bytes (NaN without a GPU)",
    "weight_bytes": "model rows: parameters and buffers of the model, bytes",
    "input_bytes": "model rows: the input batch, bytes",
    "resident_bytes": "model rows: torch.cuda.memory_allocated before the forward (weights, "
    "input, library workspaces), bytes (NaN without a GPU)",
    "steps": "model rows: ATen ops of the forward",
}
SCHEMAS["memory_pool"] = {
    "alloc_conf": "PYTORCH_CUDA_ALLOC_CONF the run's process started with (default: unset)",
    "step": "forward number in the run",
    "batch": "images of this forward (drawn at random, the same sequence for every conf)",
    "first_of_batch": "the run's first forward at this batch size",
    "allocated_bytes": "memory_stats allocated_bytes.all.current after the forward (its "
    "output freed), bytes",
    "reserved_bytes": "reserved_bytes.all.current after the forward: what the caching "
    "allocator holds from the driver, bytes",
    "active_bytes": "active_bytes.all.current after the forward, bytes",
    "inactive_split_bytes": "inactive_split_bytes.all.current: free pieces of split blocks "
    "(fragmentation), bytes",
    "segments": "segment.all.current: cudaMalloc'd segments (mapped ranges with expandable "
    "segments)",
    "alloc_retries": "num_alloc_retries so far: cudaMalloc failures that freed the cache and "
    "retried",
    "peak_allocated_bytes": "allocated_bytes.all.peak during this forward (peaks reset "
    "before each), bytes",
    "peak_reserved_bytes": "reserved_bytes.all.peak during this forward, bytes",
    "latency_ms": "host wall time of the forward, synchronised before and after, milliseconds",
    "model": "model spec (family:width)",
    "family": "YOLO family",
    "width": "width multiplier",
    "imgsz": "square input side in pixels",
    "precision": "precision of weights and activations",
    "layout": "nchw or nhwc",
    "device": "torch device",
    "seed": "seed of the batch sequence and of the inputs",
    "cudnn_benchmark": "cuDNN's per-shape algorithm search was on",
}
REQUIRED["memory_lifetimes"] = tuple(
    (
        "model width batch level index layer module_type out_bytes created_at_step "
        "freed_after_step held_until_step lifetime_steps live_bytes_after "
        "measured_peak_bytes weight_bytes input_bytes"
    ).split()
)
REQUIRED["memory_pool"] = tuple(
    ("alloc_conf step batch allocated_bytes reserved_bytes inactive_split_bytes latency_ms").split()
)
for _kind in ("memory_lifetimes", "memory_pool"):
    for _c, _text in PLACE.items():
        SCHEMAS[_kind].setdefault(_c, _text)
TEXT = TEXT | frozenset({"level", "from_layers", "alloc_conf"})
FLAG = FLAG | frozenset({"first_of_batch", "cudnn_benchmark"})
NUMBER = NUMBER | frozenset(
    {
        *(
            "layer_index created_at_step freed_after_step held_until_step lifetime_steps "
            "last_use_layer steps step segments alloc_retries"
        ).split()
    }
)

# --- live monitoring (yolo-sm monitor --record; collect.monitor) ------------------------------
SCHEMAS["monitor"] = {
    "t_s": "seconds since the monitor started (end of the sample's interval)",
    "window_s": "length of the interval the sample covers, seconds (GPM fields: the GPM windows "
    "that ended in it; device fields: read at its end)",
    "metric": "dcgm-exporter's field name: DCGM_FI_PROF_SM_OCCUPANCY, DCGM_FI_PROF_SM_ACTIVE, "
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, DCGM_FI_PROF_DRAM_ACTIVE (NVML GPM), DCGM_FI_DEV_GPU_UTIL, "
    "DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_POWER_USAGE (NVML)",
    "value": "the field's value in unit",
    "unit": "ratio (0-1, the PROF fields), % (GPU_UTIL), MiB, MHz or W, as dcgm-exporter reports",
    "gpu_index": "NVML index of the GPU (dcgm-exporter's gpu label)",
    "gpu_uuid": "UUID of the GPU (GPU-..., as nvidia-smi prints it)",
    "workload": "the yolo_sm command running beside the monitor (bench, sweep, or a label set "
    "in-process), empty when none (yolo_sm.contract.workload)",
    "model": "the model spec the workload was running, empty when none",
    "engine": "the engine it was running (a bench variant or backend/precision/layout), empty "
    "when none",
    "batch": "the batch it was running (empty when none)",
}
REQUIRED["monitor"] = ("t_s", "window_s", "metric", "value", "unit", "gpu_index", "engine")
KIND_TYPES["monitor"] = {"workload": "text", "gpu_uuid": "text", "gpu_index": "number"}


# --- the int8 convolution kernels side by side (collect.int8_kernels) ------------------------
SCHEMAS["int8_kernels"] = {
    "width": "width multiplier of the YOLOv8 model",
    "batch": "images per forward",
    "scope": "conv (one convolution alone, on the input it sees in the int8 model's forward on "
    "the photos) or model (the whole model as one CUDA graph)",
    "layer": "conv rows: the convolution's module name; empty on model rows",
    "index": "conv rows: the convolution's order in the forward",
    "kernel": "fp16 (the fp16 convolution + SiLU the int8 one replaces), cudnn (the Triton "
    "quantiser, then cuDNN's fused int8 graph), intmm (the quantiser, torch._int_mm, a one-pass "
    "epilogue; 1x1 stride 1 only), triton (yolo_sm's implicit-GEMM kernel quantising while it "
    "loads), triton_prequant (the quantiser, then the Triton kernel on int8 input); model rows: "
    "fp16 or the int8 engine's int8_kernel",
    "status": "ok / fallback (cuDNN declined: fp16 ran) / skipped (kernel not applicable) / "
    "oom / error",
    "message": "why a row is not ok",
    "in_channels": "input channels C",
    "out_channels": "output channels K",
    "kernel_size": "filter side R (= S)",
    "stride": "stride of the convolution",
    "in_h": "input height, pixels",
    "in_w": "input width, pixels",
    "ops": "multiply-adds x 2 of one call (the whole batch)",
    "median_ms": "median time of one call, milliseconds (CUDA events)",
    "iqr_ms": "interquartile range of the calls, milliseconds",
    "tops": "conv rows: ops / median, tera-operations per second (TFLOP/s for fp16)",
    "quantize_ms": "int8 conv rows: the separate quantiser alone on this input, milliseconds",
    "rel_err": "conv rows: relative L2 distance of the output from the exact int8 emulation; "
    "model rows: the engine's head output against eager fp32 on the photos",
    "tile": "triton rows: the tile the autotuner chose (M x N x K block, warps, stages)",
    "img_per_s": "model rows: batch * 1000 / median_ms",
    "sm_clock_mhz": "model rows: the median SM clock of the interleaved rounds the width's "
    "engines were timed in, MHz (absent in rows timed one engine after the other)",
    "build_s": "model rows: seconds to build, calibrate, check and capture the engine",
    "quant_convs": "int8 model rows: convolutions quantised to int8",
    "quant_fallbacks": "int8 model rows: of those, how many ran in fp16",
    "unit_s": "wall seconds of the row's (width, scope) unit, its model's build included",
    "kernel_convs": "int8 model rows: of those, how many ran the row's kernel (cudnn: cuDNN "
    "graphs; intmm: the 1x1 stride-1 ones, the rest ran cuDNN's graphs)",
}
REQUIRED["int8_kernels"] = ("width", "batch", "scope", "layer", "kernel", "status", "median_ms")
TEXT = TEXT | {"tile"}
NUMBER = NUMBER | {"index", "kernel_size", "in_h", "in_w", "ops", "tops", "kernel_convs"}


# --- the tasks of a collection run on a Dask cluster (collect --workers / --scheduler) ---------
#: the dataset name (and file stem) of a root's task log
COLLECT_TASKS = "collect_tasks"
#: kinds of tables about a root's other datasets and how they were collected, not measurements
#: of their own
DERIVED = (COLLECT_TASKS,)
SCHEMAS[COLLECT_TASKS] = {
    "run": "the run the task belongs to (one collect command on a cluster; a resumed plan has "
    "one run per command)",
    "run_started_utc": "when the run submitted its first task (ISO 8601, UTC)",
    "run_wall_s": "wall seconds of the run, from its first task submitted to its last merged",
    "workers": "worker processes (one GPU each) of the run's cluster",
    "step": "the plan step of the task",
    "unit": "the task's unit: a sweep's or bench's model (all its points), or a whole step",
    "state": "done, partial (stopped by --max-minutes), skipped (did not fit the time left), "
    "or error (the task raised)",
    "seconds": "wall seconds of the task on its worker; empty for an error",
    "cores": "CPU cores the task's threads were pinned to",
    **PLACE,
}
REQUIRED[COLLECT_TASKS] = ("run", "run_wall_s", "workers", "step", "unit", "state", "seconds")
KIND_TYPES[COLLECT_TASKS] = {
    **{c: "text" for c in ("run", "run_started_utc", "step", "unit", "state")},
    **{c: "number" for c in ("workers", "cores")},
}

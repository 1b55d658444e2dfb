"""Column contracts of the tidy tables: names carry their unit as a suffix (``_ms``, ``_bytes``,
``_pct``, ``_s``); loaders validate at the boundary and name what is missing."""

from __future__ import annotations

from yolo_sm.contract.errors import UserError

#: descriptions of the columns several kinds share (a kind may describe one its own way)
COMMON = {
    "family": "YOLO family (yolov8, yolo11), or the label of a model given as a file",
    "scale": "preset letter (n/s/m/l/x), empty for a plain width multiplier",
    "width": "width multiplier",
    "depth": "depth multiplier",
    "max_channels": "ultralytics max_channels cap before width scaling",
    "precision": "fp32 (TF32 off) / tf32 / fp16 / bf16 / fp8 / int8",
    "layout": "nchw or nhwc (channels_last) for weights and input",
    "backend": "eager / cudagraph / compile / onnxruntime / tensorrt",
    "batch": "images per forward",
    "imgsz": "square input side, pixels",
    "compile_mode": "torch.compile mode (compile rows)",
    "device": "torch device the row ran on",
    "status": "ok / oom / error",
    "message": "first line of the error (oom/error rows)",
    "model": "the model spec (family:width, a model .yaml, a .pt checkpoint, module:function)",
    "config": "profiled config label (family_wWIDTH_precision_layout_bBATCH)",
    "flops_per_img": "FLOPs per image, 2 per multiply-add (Conv2d/Linear)",
    "median_ms": "median latency of one call (one batch), ms (CUDA events on a GPU)",
    "iqr_ms": "interquartile range of the timed calls, ms",
    "min_ms": "fastest call, ms",
    "mean_ms": "mean call, ms",
    "p99_ms": "99th percentile call, ms",
    "img_per_s": "images per second (batch * 1000 / median_ms)",
    "tflops": "flops_per_img * batch / median, TFLOP/s",
    "rel_err": "relative L2 error of the raw head output vs eager fp32 on the same input",
    "check_input": "input of the check behind rel_err: photos, off, or empty (uniform noise)",
    "samples_ms": "every timed call, ms (list)",
    "n_samples": "timed calls",
    "noisy": "IQR/median above 10 %",
    "peak_mem_bytes": "peak allocated GPU bytes during the timed calls (a graph's pool aside)",
    "build_s": "seconds to build and check the engine (export, compile or capture)",
    "kernel_name": "demangled kernel name",
    "duration_us": "kernel duration, us",
    "grid_size": "blocks in the grid",
    "block_size": "threads per block",
    "registers_per_thread": "registers per thread",
    "shared_mem_per_block_bytes": "static + dynamic shared memory per block, bytes",
    "layer": "model layer (model.N, layer3.7, blocks.N)",
    "module_type": "layer class (Conv, C2f, SPPF, Detect, ...)",
    "stage": "backbone / neck / head",
    "kernel_class": "yolo_sm.analyse.kernels class",
    "t_s": "seconds since the sampler started (end of the window)",
    "window_s": "length of the sampling window, s",
    "engine": "the engine (backend/precision/layout)",
    "index": "position in forward order",
    "quant_convs": "8-bit rows (fp8, int8): convolutions quantised",
    "quant_fallbacks": "8-bit rows: of those, how many cuDNN declined (ran in fp16)",
    "quant_handoffs": "int8 rows: of those, how many hand int8 output to the next int8 conv",
    "quant_plans_cached": "8-bit rows on a GPU: cuDNN graphs whose tuned plan came from disk",
    "sm_clock_mhz": "median SM clock of the interleaved rounds, MHz",
}


def _shared(names: str) -> dict[str, str]:
    """The :data:`COMMON` descriptions of ``names`` (space-separated), in that order."""
    return {n: COMMON[n] for n in names.split()}


# What the host decided of a timed point (optional: absent in older tables)
HOST_COLUMNS = {
    "host_cpu_ms": "CPU time of the launching thread per forward (issuing only), ms",
    "launches_per_forward": "kernel, graph, memcpy and memset launches the host issued per "
    "forward (a graph replay is 1; 0 on a CPU)",
    "kernels_per_forward": "GPU kernels, memcpys and memsets that ran per forward",
    "gpu_busy_ms": "summed duration of those GPU activities per forward, ms",
    "gpu_busy_fraction": "gpu_busy_ms / median_ms",
    "host_launch_us": "host cost of one eager launch of a tiny kernel, us (NaN on a CPU)",
    "host_bound": "GPU idle above vocab.HOST_BOUND_IDLE_SHARE with more than 2 launches per "
    "forward (False on a CPU)",
}
QUANT = _shared("quant_convs quant_fallbacks quant_handoffs quant_plans_cached")
# Kineto's occupancy pass after the timed calls (wide_vs_deep)
OCCUPANCY_PASS = {
    "kineto_kernels_per_forward": "GPU kernels per forward in a short Kineto pass",
    "kineto_kernel_us": "their summed duration per forward, us",
    "est_occupancy_tw_pct": "Kineto's estimated achieved occupancy, kernel-time weighted",
    "theoretical_occupancy_tw_pct": "theoretical occupancy of the launches, kernel-time weighted",
}
# Wall seconds per phase and torch.compile's disk cache (optional in sweep and bench tables)
PHASE_SECONDS = {
    "warmup_s": "wall seconds of the estimate and warm-up calls",
    "warmup_settled": "the warm-up ended with time and SM clock settled, not at its cap (GPU)",
    "timed_s": "wall seconds of the timed calls",
    "profile_s": "wall seconds of the profiler pass after the timed calls",
    "compile_cache": "compile rows: what the build found in inductor's disk cache: warm, cold "
    "or partial",
    "autotuned_ops": "max-autotune rows: ops the build benchmarked afresh",
    "autotune_reads": "max-autotune rows: autotune-cache lookups read from disk",
}
# Where a row was measured, recorded by `collect --workers` / `--scheduler` (optional)
PLACE = {
    "gpu_uuid": "UUID of the GPU the row was measured on (empty on a CPU)",
    "gpu_index": "index of that GPU on its host (nvidia-smi's numbering)",
    "host": "host name of the machine that measured the row",
    "worker": "name of the Dask worker that measured the row",
}
PLACE_COLUMNS = tuple(PLACE)

SWEEP = {
    **_shared("family scale width depth max_channels precision layout backend batch imgsz"),
    **_shared("compile_mode device status message flops_per_img median_ms iqr_ms min_ms img_per_s"),
    **_shared("tflops rel_err check_input samples_ms noisy peak_mem_bytes"),
    "graph_pool_bytes": "cudagraph rows: the graph's private pool (its activations), bytes",
    "bn_calibrated": "random-weight model with BatchNorm statistics set from random images",
    "model": COMMON["model"],
    **HOST_COLUMNS,
    **QUANT,
}

SCHEMAS: dict[str, dict[str, str]] = {
    "sweep": SWEEP,
    "wide_vs_deep": {
        **SWEEP,
        "pair": "index of the FLOPs-matched pair",
        "role": "wide (wider, shallower) or deep (narrower, deeper)",
        "match_rel_diff": "the deep model's FLOPs per image over the wide one's, minus 1",
        **OCCUPANCY_PASS,
    },
    "ncu": {
        "kernel_id": "order of the kernel in the profiled process",
        "kernel_name": COMMON["kernel_name"],
        "nvtx_path": "NVTX ranges around the kernel, outermost first",
        "nvtx_range": "innermost NVTX range (the profiled config or layer)",
        "duration_us": "gpu__time_duration.sum, us",
        "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
        "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
        **_shared("registers_per_thread shared_mem_per_block_bytes block_size grid_size"),
        "waves_per_sm": "launch__waves_per_multiprocessor",
        "limit_registers": "blocks per SM allowed by registers",
        "limit_shared_mem": "blocks per SM allowed by shared memory",
        "limit_warps": "blocks per SM allowed by the warp slots",
        "limit_blocks": "blocks per SM allowed by the block slots",
        "local_load_sectors": "local-memory (register spill) load sectors",
        "local_store_sectors": "local-memory store sectors",
        "threads_per_instruction": "active threads per executed warp instruction (32 at most)",
        "warp_execution_efficiency_pct": "threads_per_instruction / 32, %",
        "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
        "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
        "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    },
    "kernels": {
        **_shared("config kernel_name"),
        "start_us": "kernel start on the trace clock, us",
        **_shared(
            "duration_us grid_size block_size registers_per_thread shared_mem_per_block_bytes"
        ),
        "est_occupancy_pct": "Kineto's estimate: calculator occupancy capped by grid size",
        "theoretical_occupancy_pct": "yolo_sm.analyse.occupancy for the kernel's launch",
        "limiter": "registers / shared_mem / warps / blocks",
        "waves": "grid_size / (active blocks per SM x SMs)",
        "iteration": "index of the profiled forward",
        **_shared("layer module_type stage kernel_class"),
        "unit_s": "wall seconds of the row's config: its engine build and profiled forwards",
    },
    "gpm": {
        **_shared("t_s window_s"),
        "metric": "sm_occupancy_pct / sm_util_pct / tensor_util_pct / dram_bw_util_pct (NVML "
        "fallback: gpu_util_pct / mem_util_pct)",
        "value": "percent over the window",
        "source": "gpm or nvml_util",
        "power_w": "board power draw over the window, W",
    },
    "layers": {
        **_shared("config layer module_type stage"),
        "kineto_kernels": "kernels per forward in the PyTorch profiler trace",
        "kineto_time_us": "kernel time per forward in the trace, us",
        "kineto_theoretical_occupancy_tw_pct": "time-weighted theoretical occupancy (Kineto)",
        "est_occupancy_tw_pct": "time-weighted Kineto estimated achieved occupancy",
        "ncu_kernels": "kernels per forward under Nsight Compute",
        "ncu_time_us": "kernel time per forward under ncu, us",
        "ncu_theoretical_occupancy_tw_pct": "time-weighted theoretical occupancy (ncu)",
        "ncu_achieved_occupancy_tw_pct": "time-weighted achieved occupancy (ncu)",
        "kernels_match": "both profilers saw as many kernels in the layer",
        "gpm_sm_occupancy_pct": "median GPM SM occupancy of the config's windows",
    },
    "ceilings": {
        "ceiling": "matmul_<precision>[_n<side>], matmul_int8_cudnn_n<side>, copy_d2d, "
        "copy_h2d_pinned, copy_d2h_pinned, copy_h2d_frame_fp16",
        "regime": "burst (after a rest: the peak) or sustained (back to back); absent: sustained",
        "value": "the ceiling in unit",
        "unit": "TFLOP/s, TOP/s (int8), GB/s (bytes read + written) or ms",
        "size": "problem size (matrix side^3 or bytes)",
        **_shared("median_ms iqr_ms n_samples"),
        "fill": "matmul operands: randn (the ceiling) or zeros (a power diagnostic)",
        "kernel": "what ran the matmul (torch.matmul, _scaled_mm, _int_mm, cuDNN 1x1 conv)",
        "sm_clock_mean_mhz": "mean SM clock during the timed calls, MHz",
        "sm_clock_min_mhz": "lowest SM clock during the timed calls, MHz",
        "power_mean_w": "mean power draw during the timed calls, W",
        "power_max_w": "highest power draw during the timed calls, W",
        "power_limit_w": "the GPU's enforced power limit, W",
        "nvml_samples": "NVML readings behind the clock and power figures",
        "sm_clock_end_mhz": "SM clock right after the timed calls, MHz",
    },
    "probe": {
        "stage": "h2d, letterbox, engine, decode, postprocess (each alone), their variants, or a "
        "whole-batch row (batch, [graph,] N stream(s))",
        "wall_ms": "median host wall time of the stage, ms",
        "gpu_ms": "median CUDA-event time of the stage, ms (empty on a CPU)",
        "same_result": "alternative rows: the result equals the main row's",
        **_shared("family width batch imgsz engine"),
        "frames": "bus (every frame the bus photo) or alternate (bus and zidane)",
        "reps": "timed repetitions per stage",
        "nms": "the NMS implementation (yolo_sm.core.nms.NMS_IMPL)",
        "candidates_per_frame": "boxes above the score threshold per frame",
        "boxes_per_frame": "boxes per frame after NMS",
    },
    "numerics": {
        "input": "random (uniform noise per seed) / photo (ultralytics' photos, letterboxed)",
        "metric": "rel_err (head output vs eager fp32) / boxes (vs the reference's boxes)",
        **_shared("family width precision"),
        "reference": "eager fp32 for rel_err, a precision for boxes",
        **_shared("layout imgsz batch"),
        "class_prior": "measured with the bench's class prior on the class logits",
        "device": COMMON["device"],
        "seed": "seed of the random input",
        "rel_err": COMMON["rel_err"],
        "tolerance": "the precision's tolerance for rel_err",
        "frame": "index of the photo (boxes rows)",
        "boxes": "boxes after NMS of the measured precision",
        "reference_boxes": "boxes after NMS of the reference precision",
        "matched": "share of boxes with a same-class reference box at IoU >= 0.9",
        "reference_matched": "share of reference boxes with a same-class partner at IoU >= 0.9",
        "fp8_kernel": "fp8 rows: emulate (CPU) or cudnn (GPU)",
        "calibration": "int8 rows: max (max |x|) or percentile (int8_percentile of |x|)",
        "int8_percentile": "percentile rows: the percentile of |x| that sets the range",
        "int8_kernel": "int8 rows: emulate (CPU) or cudnn (GPU)",
        **_shared("quant_convs quant_fallbacks"),
        "unfused_convs": "int8 rows: convolutions whose epilogue ran in torch, not in cuDNN",
    },
    "bench": {
        **HOST_COLUMNS,
        **_shared("family width batch model"),
        "variant": "backend[:compile mode]/precision/layout, pipeline/<engine>[/<mode>]/s<streams> "
        "or ultralytics_predict",
        "scope": "model_only (the forward) or frames_to_boxes (frames in, boxes out)",
        "backend": "eager / cudagraph / compile / ... (ultralytics for predict rows)",
        **_shared("compile_mode precision layout"),
        "streams": "pipeline rows: batches in flight",
        "pipeline_mode": "pipeline rows: full, topk or graph (empty: full)",
        "pinned": "pipeline rows: frames in pinned host memory",
        "nms": "pipeline rows: the NMS implementation",
        "candidates_per_frame": "pipeline rows: boxes above the score threshold per frame",
        "boxes_per_frame": "pipeline rows: boxes per frame after NMS",
        **_shared("status message"),
        "median_ms": "median (p50) latency of one batch, ms",
        "iqr_ms": COMMON["iqr_ms"],
        "p99_ms": "99th percentile latency of one batch, ms",
        "img_per_s": "images (frames) per second",
        "vs_baseline": "img_per_s over the eager/fp16/nhwc baseline's of the same unit",
        "n_samples": "timed calls (engine rows) or batches (pipeline and predict rows)",
        **_shared("noisy rel_err check_input tflops flops_per_img"),
        "peak_mem_bytes": "engine rows: peak allocated GPU bytes of one call, less the unit's "
        "other engines'",
        "rounds": "engine rows: interleaved rounds the unit's engines were timed in",
        "round_ms": "engine rows: each round's median latency, ms",
        "round_sm_clock_mhz": "engine rows: the SM clock after each round, MHz",
        "round_spread_pct": "engine rows: (max - min) of round_ms over median_ms, %",
        "sm_clock_mhz": "engine rows: the median of round_sm_clock_mhz, MHz",
        "build_s": "seconds to build the engine (export, compile or capture, the check)",
        "compile_s": "torch.compile's share of build_s",
        "compile_first_s": "the first compiling call's share of compile_s",
        "capture_s": "CUDA graph capture's share of build_s",
        "model_only_img_per_s": "pipeline rows: img/s of the pipeline's engine alone",
        "pipeline_vs_model_only": "pipeline rows: frames/s over model_only_img_per_s",
        **QUANT,
        "unit_s": "wall seconds of the (family, width, batch) unit",
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
        "model": "yolov8 / yolo11, resnet101 or wide (the wide conv stack)",
        "family": "model family as profiling configs name it",
        "width": "width multiplier (YOLO) or factor (wide); 1.0 for ResNet",
        "depth": "depth multiplier (YOLO only)",
        "max_channels": COMMON["max_channels"],
        "imgsz": COMMON["imgsz"],
        "batch": "images the byte columns count (1: per image)",
        "bytes_per_element": "bytes per tensor element the byte columns count",
        **_shared("index layer module_type stage"),
        "in_channels": "channels of the layer's 4-D inputs, summed",
        "out_channels": "channels of the layer's output(s), summed",
        "requested_channels": "YAML channels x width before the cap and rounding",
        "rounded": "the real width was rounded up to a multiple of 8",
        "capped": "max_channels lowered this layer's channels",
        "stride": "input side / output side",
        "out_h": "output height, pixels",
        "out_w": "output width, pixels",
        "params": "parameters of the layer (BN folded)",
        "flops": "FLOPs per image, 2 per multiply-add",
        "weight_bytes": "the layer's weights, bytes",
        "in_bytes": "the layer's 4-D inputs per image, bytes",
        "out_bytes": "the layer's output activation per image, bytes",
        "min_bytes": "weight_bytes + in_bytes + out_bytes: what a fused layer moves",
        "conv_io_bytes": "inputs plus outputs of every Conv2d/Linear inside, per image, bytes",
        "conv_weight_bytes": "weights of those convolutions, bytes",
        "conv_bytes": "conv_io_bytes + conv_weight_bytes: what unfused convolutions move",
    },
    "techniques": {
        "technique": "fusion, autocast, autocast_dtypes or batch_buffer",
        "model": "the model (resnet101, yolov8:WIDTH)",
        "family": "model family (resnet101, yolov8)",
        "width": "width multiplier (1.0 for ResNet)",
        "variant": "bn_unfused / bn_folded / conv_bias_relu, autocast / half_model, stack_new / "
        "prealloc_copy / prealloc_stack_out",
        "backend": "eager / cudagraph; none for assembly rows",
        "scope": "forward, assembly, step (assembly then forward) or dtypes",
        **_shared("batch imgsz"),
        "precision": "the 16-bit type (fp16 on a GPU, bf16 on a CPU)",
        "layout": "nhwc",
        **_shared(
            "device status message median_ms iqr_ms min_ms mean_ms p99_ms img_per_s n_samples"
        ),
        "warmup_calls": "calls before the timed ones",
        "noisy": COMMON["noisy"],
        "l2_flush": "L2 flushed before each timed call",
        "samples_ms": COMMON["samples_ms"],
        "host_cpu_ms": HOST_COLUMNS["host_cpu_ms"],
        "rel_err": "relative L2 error of the head output vs the eager fp32 (unfused) model",
        "kernels_per_forward": "GPU kernels per call in a Kineto pass (empty on a CPU)",
        "kernel_time_ms": "summed kernel time per call in that pass, ms",
        "elementwise_kernels_per_forward": "elementwise kernels per call",
        "elementwise_time_pct": "share of kernel time in elementwise kernels, %",
        "copy_time_pct": "share of kernel time in copy/concat kernels, %",
        "matrix_time_pct": "share of kernel time in convolution and GEMM kernels, %",
        "launches_per_forward": HOST_COLUMNS["launches_per_forward"],
        "gpu_busy_ms": HOST_COLUMNS["gpu_busy_ms"],
        "bn_modules": "BatchNorm2d modules left in the model",
        "fused_conv_modules": "convolutions applying bias + ReLU (+ add) in their cuDNN call",
        "static_buffer": "the batch lands in a buffer allocated once",
        "graph_input_copy": "the batch is copied into the CUDA graph's static input",
        "module_type": "autocast_dtypes rows: module class",
        "calls": "autocast_dtypes rows: calls of modules of that type per forward",
        "fp32_output_calls": "of those, calls whose output was float32",
        "upcast_calls": "of those, calls with a 16-bit input and a float32 output",
    },
    "resolutions": {
        **_shared("family width depth batch precision layout device"),
        "frame_size": "camera frame size WIDTHxHEIGHT",
        "frame_w": "frame width, pixels",
        "frame_h": "frame height, pixels",
        "imgsz_h": "engine input height, pixels (a multiple of 32)",
        "imgsz_w": "engine input width, pixels",
        "engine": "fixed (built for this shape) or dynamic (one engine for every shape)",
        "backend": "cudagraph / eager / compile (dynamic=True for a dynamic engine)",
        **_shared("status message build_s rel_err median_ms iqr_ms img_per_s"),
        "mpix_per_s": "img_per_s x engine input pixels / 1e6",
        **_shared("samples_ms noisy"),
        "recompiles": "compile engine: graphs dynamo compiled at this shape",
        "first_call_s": "dynamic engines: seconds of the first call at this shape",
        **HOST_COLUMNS,
    },
    "sharing": {
        "pair": "the two engines, WIDTHxBATCH+WIDTHxBATCH (engine a first)",
        "mode": "alone_a / alone_b, streams (one process) or processes (two processes)",
        "engine": "a or b",
        **_shared("config family width batch precision layout backend imgsz"),
        "depth": "batches each engine kept in flight",
        "batches": "batches that started and ended inside the measured window",
        "window_s": "the measured window (CUDA events), s",
        "img_per_s": "batches * batch / window_s",
        "p50_ms": "median GPU time of a batch on its stream, ms",
        "p99_ms": "99th percentile of the same, ms",
        "mean_ms": "mean of the same, ms",
        "mps_used": "the CUDA MPS server shared the GPU",
        "mig_used": "the engines ran in MIG slices",
        "mps_server": "running / not running: an MPS control pipe was found",
        "mig_mode": "the GPU's MIG mode (enabled / disabled / unsupported)",
        "compute_mode": "the GPU's compute mode (default / exclusive_process / prohibited)",
    },
    "sharing_kernels": {
        "pair": "the two engines (engine a first)",
        "mode": "alone_a / alone_b / streams",
        "engine": "a or b",
        "kernel_class": COMMON["kernel_class"],
        "kernels": "kernels of the class the engine ran in the capture",
        "time_us": "their summed duration, us",
        "batches": "the engine's graph replays in the capture",
        "time_us_per_batch": "time_us / batches, us",
        "time_share": "time_us over the engine's kernel time",
        "overlap_us": "of time_us, time during which the other engine ran a kernel, us",
        "overlap_share": "overlap_us / time_us",
    },
    "compile_cache": {
        **_shared("family width batch imgsz precision layout device compile_mode"),
        "run": "order of the build against its cache folder (1: empty folder)",
        "cache": "the planned cache state: cold (a new folder) or warm (the cold build's)",
        **_shared("status message"),
        "compile_cache": "what the build found: warm, cold or partial",
        "compile_s": "seconds of the compiling calls",
        "build_s": "seconds to build the engine: compile and the check",
        "process_s": "wall seconds of the whole build process",
        "unit_s": "wall seconds of the row's (width, mode) unit",
        **_shared("img_per_s median_ms iqr_ms rel_err"),
        "fx_cache_hits": "FX graph cache hits during the build",
        "fx_cache_misses": "FX graph cache misses during the build",
        "cache_files_before": "files in the cache folder before the build",
        "cache_files_after": "files in the cache folder after the build",
        "graphs_compiled": "graphs dynamo compiled during the build",
    },
    "memory_lifetimes": {
        "model": "yolov8 / yolo11 or resnet101",
        "family": "model family (yolov8, resnet101)",
        "width": "width multiplier (1.0 for ResNet)",
        **_shared("batch imgsz precision layout device"),
        "level": "model (one summary row), layer (one per layer) or tensor (one per activation)",
        "index": "layer rows: forward order; tensor rows: creation order",
        "layer": "layer name; tensor rows: the layer that created it",
        "layer_index": "position of that layer in forward order",
        "module_type": "layer class; tensor rows: the ATen op; model rows: the model class",
        "stage": COMMON["stage"],
        "from_layers": "layer rows: the layers it reads (ultralytics' f)",
        "out_bytes": "output bytes (model rows: every activation summed)",
        "created_at_step": "the layer position or ATen op step that created it",
        "freed_after_step": "last use: the last step that reads it",
        "held_until_step": "the step after which eager PyTorch freed it",
        "lifetime_steps": "freed_after_step - created_at_step",
        "last_use_layer": "tensor rows: the layer whose op used it last",
        "transient_bytes": "tensor rows: bytes its op allocated and freed before returning",
        "live_bytes_after": "layer rows: outputs so far still to be read after this layer, bytes",
        "held_bytes_after": "layer rows: outputs so far not yet released after this layer, bytes",
        "measured_allocated_bytes": "layer rows: allocated after the layer minus before, bytes",
        "measured_peak_bytes": "peak allocated during the layer (model rows: the forward), bytes",
        "weight_bytes": "model rows: parameters and buffers, bytes",
        "input_bytes": "model rows: the input batch, bytes",
        "resident_bytes": "model rows: allocated before the forward, bytes",
        "steps": "model rows: ATen ops of the forward",
    },
    "memory_pool": {
        "alloc_conf": "PYTORCH_CUDA_ALLOC_CONF of the run (default: unset)",
        "step": "forward number in the run",
        "batch": "images of this forward (a seeded random sequence)",
        "first_of_batch": "the run's first forward at this batch size",
        "allocated_bytes": "allocated bytes after the forward",
        "reserved_bytes": "bytes the caching allocator holds after the forward",
        "active_bytes": "active bytes after the forward",
        "inactive_split_bytes": "free pieces of split blocks (fragmentation), bytes",
        "segments": "cudaMalloc'd segments",
        "alloc_retries": "cudaMalloc failures that freed the cache and retried, so far",
        "peak_allocated_bytes": "peak allocated during this forward, bytes",
        "peak_reserved_bytes": "peak reserved during this forward, bytes",
        "latency_ms": "host wall time of the forward, synchronised, ms",
        **_shared("model family width imgsz precision layout device"),
        "seed": "seed of the batch sequence and of the inputs",
        "cudnn_benchmark": "cuDNN's per-shape algorithm search was on",
    },
    "monitor": {
        "t_s": "seconds since the monitor started (end of the sample's interval)",
        "window_s": "length of the interval the sample covers, s",
        "metric": "dcgm-exporter's field name (DCGM_FI_PROF_* from GPM, DCGM_FI_DEV_* from NVML)",
        "value": "the field's value in unit",
        "unit": "ratio (0-1), %, MiB, MHz or W, as dcgm-exporter reports",
        "gpu_index": "NVML index of the GPU",
        "gpu_uuid": "UUID of the GPU",
        "workload": "the yolo_sm command running beside the monitor, empty when none",
        "model": "the model spec the workload was running, empty when none",
        "engine": "the engine it was running, empty when none",
        "batch": "the batch it was running, empty when none",
    },
    "int8_kernels": {
        "width": "width multiplier of the YOLOv8 model",
        "batch": COMMON["batch"],
        "scope": "conv (one convolution alone) or model (the whole model as one CUDA graph)",
        "layer": "conv rows: the convolution's module name",
        "index": "conv rows: the convolution's order in the forward",
        "kernel": "fp16, cudnn, intmm, triton or triton_prequant",
        "status": "ok / fallback (cuDNN declined) / skipped / oom / error",
        "message": "why a row is not ok",
        "in_channels": "input channels C",
        "out_channels": "output channels K",
        "kernel_size": "filter side R (= S)",
        "stride": "stride of the convolution",
        "in_h": "input height, pixels",
        "in_w": "input width, pixels",
        "ops": "multiply-adds x 2 of one call",
        **_shared("median_ms iqr_ms"),
        "tops": "conv rows: ops / median, TOP/s (TFLOP/s for fp16)",
        "quantize_ms": "int8 conv rows: the separate quantiser alone, ms",
        "rel_err": "conv rows: vs the exact int8 emulation; model rows: vs eager fp32",
        "tile": "triton rows: the tile the autotuner chose",
        "img_per_s": "model rows: batch * 1000 / median_ms",
        "sm_clock_mhz": COMMON["sm_clock_mhz"],
        "build_s": "model rows: seconds to build, calibrate, check and capture the engine",
        **_shared("quant_convs quant_fallbacks"),
        "unit_s": "wall seconds of the row's (width, scope) unit",
        "kernel_convs": "int8 model rows: of those, how many ran the row's kernel",
    },
}
for _kind in ("sweep", "bench"):
    for _col, _text in PHASE_SECONDS.items():
        SCHEMAS[_kind].setdefault(_col, _text)
SCHEMAS["sweep"].setdefault("build_s", COMMON["build_s"])
SCHEMAS["compile_cache"].update({k: v for k, v in PHASE_SECONDS.items() if k != "compile_cache"})

#: the dataset name (and file stem) of a root's task log (collect --workers / --scheduler)
COLLECT_TASKS = "collect_tasks"
#: kinds of tables about a root's other datasets, not measurements of their own
DERIVED = (COLLECT_TASKS,)
SCHEMAS[COLLECT_TASKS] = {
    "run": "the run the task belongs to (one collect command on a cluster)",
    "run_started_utc": "when the run submitted its first task (ISO 8601, UTC)",
    "run_wall_s": "wall seconds of the run, first task submitted to last merged",
    "workers": "worker processes (one GPU each) of the run's cluster",
    "step": "the plan step of the task",
    "unit": "the task's unit: a sweep's or bench's model, or a whole step",
    "state": "done, partial, skipped or error",
    "seconds": "wall seconds of the task on its worker",
    "cores": "CPU cores the task's threads were pinned to",
}
for _kind, _columns in SCHEMAS.items():
    if _kind != "monitor":
        for _col, _text in PLACE.items():
            _columns.setdefault(_col, _text)


# Columns every table of a kind must have (the others in SCHEMAS are described when present)
_REQUIRED = {
    "sweep": "family scale width depth max_channels precision layout backend batch imgsz "
    "compile_mode device status message flops_per_img median_ms iqr_ms min_ms img_per_s tflops "
    "rel_err samples_ms noisy bn_calibrated",
    "ncu": "kernel_id kernel_name nvtx_path nvtx_range duration_us",
    "kernels": "kernel_name start_us duration_us grid_size block_size registers_per_thread "
    "shared_mem_per_block_bytes est_occupancy_pct theoretical_occupancy_pct limiter waves layer "
    "stage kernel_class",
    "gpm": "t_s window_s metric value source",
    "layers": "config layer module_type stage kineto_time_us ncu_time_us",
    "gpm_overhead": "config round sampler hz forwards seconds img_per_s",
    "ceilings": "ceiling value unit median_ms",
    "model_tables": "model family width imgsz batch bytes_per_element index layer module_type "
    "stage params flops weight_bytes in_bytes out_bytes min_bytes conv_io_bytes "
    "conv_weight_bytes conv_bytes",
    "probe": "stage wall_ms gpu_ms width batch engine candidates_per_frame",
    "numerics": "input metric family width precision reference imgsz device",
    "bench": "family width batch variant scope status message median_ms p99_ms img_per_s "
    "vs_baseline",
    "techniques": "technique model variant backend scope batch precision device status message",
    "resolutions": "family width batch frame_size imgsz_h imgsz_w engine backend status message "
    "img_per_s mpix_per_s",
    "sharing": "pair mode engine config width batch batches img_per_s p50_ms p99_ms",
    "sharing_kernels": "pair mode engine kernel_class kernels time_us batches time_share "
    "overlap_us",
    "compile_cache": "family width batch compile_mode run cache status message",
    "memory_lifetimes": "model width batch level index layer module_type out_bytes "
    "created_at_step freed_after_step held_until_step lifetime_steps live_bytes_after "
    "measured_peak_bytes weight_bytes input_bytes",
    "memory_pool": "alloc_conf step batch allocated_bytes reserved_bytes inactive_split_bytes "
    "latency_ms",
    "monitor": "t_s window_s metric value unit gpu_index engine",
    "int8_kernels": "width batch scope layer kernel status median_ms",
    COLLECT_TASKS: "run run_wall_s workers step unit state seconds",
}
REQUIRED = {kind: tuple(names.split()) for kind, names in _REQUIRED.items()}
REQUIRED["wide_vs_deep"] = (*REQUIRED["sweep"], "pair", "role")

#: column types every table is checked for (columns not named here are not checked):
#: text (strings), flag (booleans), list (one list per row), number (ints or floats; the
#: default for a name ending in a unit suffix). An all-empty column passes every type.
TEXT = frozenset(
    "family scale precision layout backend compile_mode device status message check_input "
    "kernel_name nvtx_path nvtx_range config limiter layer module_type stage kernel_class "
    "metric source ceiling unit engine frames nms input reference fp8_kernel variant scope "
    "calibration int8_kernel pair mode mps_server mig_mode compute_mode technique cache "
    "model size phase capture kineto_main_limiter grid block role frame_size compile_cache "
    "level from_layers alloc_conf tile".split()
)
FLAG = frozenset(
    "noisy bn_calibrated kernels_match rounded capped same_result class_prior pinned sampler "
    "straddles_mark l2_flush mps_used mig_used static_buffer graph_input_copy warmup_settled "
    "first_of_batch cudnn_benchmark".split()
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
    "sm_coverage_tw tensor_core_time_share ncu_time_share rounds calls fp32_output_calls "
    "quant_convs quant_fallbacks quant_handoffs quant_plans_cached unfused_convs int8_percentile "
    "match_rel_diff frame_w frame_h imgsz_h imgsz_w kineto_kernels_per_forward upcast_calls "
    "batches kernels time_share overlap_share local_load_sectors local_store_sectors "
    "threads_per_instruction bn_modules fused_conv_modules run fx_cache_hits fx_cache_misses "
    "cache_files_before cache_files_after autotuned_ops autotune_reads layer_index "
    "created_at_step freed_after_step held_until_step lifetime_steps last_use_layer steps step "
    "segments alloc_retries kernel_size in_h in_w ops tops kernel_convs".split()
)
UNIT_SUFFIXES = ("_ms", "_us", "_s", "_pct", "_bytes", "_mhz", "_per_s")
#: per kind, columns whose type differs from the name's usual one
KIND_TYPES = {
    "kernels": {"device": "number"},  # the CUDA device index of a trace event
    "wide_vs_deep": {"pair": "number"},  # the pair's index (a sharing pair is its text)
    "monitor": {"workload": "text", "gpu_uuid": "text", "gpu_index": "number"},
    COLLECT_TASKS: {
        **{c: "text" for c in ("run", "run_started_utc", "step", "unit", "state")},
        **{c: "number" for c in ("workers", "cores")},
    },
}
#: kinds whose tables may hold no rows: a PyTorch trace on a CPU has no GPU kernels
EMPTY_OK = frozenset({"kernels", "sharing_kernels"})
# the columns that name a sweep point (a resumed sweep skips points whose key it holds)
KEY_COLUMNS = tuple(
    "family scale width depth max_channels precision layout backend batch imgsz compile_mode "
    "device".split()
)


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


def problems(df, kind: str) -> list[str]:
    """What is wrong with ``df`` as a ``kind`` table: missing required columns, columns of the
    wrong type, no rows (except the kinds of :data:`EMPTY_OK`)."""
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
    """The columns of ``df`` of another type than a ``kind`` table holds, as ``name (dtype,
    expected type)``."""
    out = []
    for c in df.columns:
        want = column_type(kind, str(c))
        if want and not _type_ok(df[c], want):
            out.append(f"{c} ({df[c].dtype}, expected {want})")
    return out


def validate(df, kind: str, name: str | None = None, source=None):
    """``df``, or a UserError naming the table, its file (``source``) and its problems."""
    found = problems(df, kind)
    if found:
        where = f" ({source})" if source else ""
        raise UserError(f"{name or kind} table{where} " + "; ".join(found))
    return df

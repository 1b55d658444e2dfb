"""The words every layer shares: backends, precisions, layouts, compile modes, numerical
tolerances, pipeline stages (``str`` Enums: values compare and serialise as strings)."""

from __future__ import annotations

from enum import Enum


class Backend(str, Enum):
    EAGER = "eager"
    CUDAGRAPH = "cudagraph"
    COMPILE = "compile"
    ONNXRUNTIME = "onnxruntime"
    TENSORRT = "tensorrt"
    COPYFREE = "copyfree"  # fp16/bf16 NHWC YOLO, convolutions into their concatenation's slice


class Precision(str, Enum):
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    FP8 = "fp8"  # E4M3 convolutions, fp16 elsewhere (yolo_sm.core.engines.fp8)


class Layout(str, Enum):
    NCHW = "nchw"
    NHWC = "nhwc"


#: the backends that run precision int8 (TensorRT's own engines; engines.int8 in the others)
INT8_BACKENDS = (Backend.EAGER, Backend.CUDAGRAPH, Backend.COMPILE, Backend.TENSORRT)
#: why an int8 engine on another backend is refused (the engine config) or left out of a grid
INT8_BACKENDS_ONLY = (
    "int8 runs on the "
    + ", ".join(b.value for b in INT8_BACKENDS[:-1])
    + f" and {INT8_BACKENDS[-1].value} backends only"
)
#: how the int8 engines calibrate an activation's range: max |x| or the INT8_PERCENTILE of |x|
INT8_CALIBRATIONS = ("max", "percentile")
INT8_PERCENTILE = 99.99
#: the int8 engines' convolution kernels without TensorRT (engines.int8.choose_kernel)
INT8_KERNELS = ("auto", "emulate", "cudnn", "triton", "intmm")
#: what an int8_kernels table times per convolution (fp16: the convolution int8 replaces;
#: triton_prequant: the separate quantiser, then the Triton kernel on int8) and per model
INT8_CONV_KERNELS = ("fp16", "cudnn", "intmm", "triton", "triton_prequant")
INT8_MODEL_KERNELS = ("fp16", "cudnn", "intmm", "triton")

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: exact model rewrites before torch.compile, named after its mode with "+" (core.models.rewrites)
COMPILE_REWRITES = ("sep-pool",)

#: how a bench's pipeline row post-processes (yolo_sm.core.pipeline.PipelineConfig)
PIPELINE_MODES = ("full", "topk", "graph")


#: largest relative L2 error of the head output against eager fp32 before an engine is rejected
TOLERANCE = {
    Precision.FP32: 1e-3,
    Precision.TF32: 2e-2,
    Precision.FP16: 2e-2,
    Precision.BF16: 1e-1,
    Precision.INT8: 2.5e-1,  # checked on the photos (engines.base.photo_input), as fp8
    Precision.FP8: 1e-1,
}


# the stages one batch goes through, whose sum a 1-stream batch costs at least
PIPELINE_STAGES = ("h2d", "letterbox", "engine", "decode", "postprocess")


#: the idle share of a forward above which a point with more launches than a graph replay is
#: host-bound (yolo_sm.analyse.hostbound.host_bound_rule); ties to the 10 % re-measure tolerance
HOST_BOUND_IDLE_SHARE = 0.10


def unsupported(precision: str, layout: str, backend: str, device: str = "cuda") -> str | None:
    """Why the sweep runner leaves a grid combination out, or None."""
    if precision == "int8" and backend not in INT8_BACKENDS:
        return INT8_BACKENDS_ONLY
    if backend == "onnxruntime" and precision != "fp32":
        return "onnxruntime runs fp32 only"
    if backend == "tensorrt" and precision in ("tf32", "bf16"):
        return "tensorrt engines here are fp32/fp16/int8"
    if backend in ("onnxruntime", "tensorrt") and layout == "nhwc":
        return f"{backend} picks its own layouts (run it with nchw input)"
    if backend == "cudagraph" and not device.startswith("cuda"):
        return "cudagraph needs a CUDA device"
    if precision == "tf32" and not device.startswith("cuda"):
        return "tf32 exists only on a GPU"
    return None

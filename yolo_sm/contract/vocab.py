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


#: the backends that run precision int8: TensorRT's own int8 engines, and yolo_sm's int8
#: convolutions (engines.int8) in eager, in a CUDA graph and under torch.compile
INT8_BACKENDS = (Backend.EAGER, Backend.CUDAGRAPH, Backend.COMPILE, Backend.TENSORRT)
#: why an int8 engine on another backend is refused (the engine config) or left out of a grid
INT8_BACKENDS_ONLY = (
    "int8 runs on the "
    + ", ".join(b.value for b in INT8_BACKENDS[:-1])
    + f" and {INT8_BACKENDS[-1].value} backends only"
)
#: how the int8 engines without TensorRT calibrate an activation's range (engines.int8): max
#: |x| over the calibration photos, or a percentile of |x| (INT8_PERCENTILE by default)
INT8_CALIBRATIONS = ("max", "percentile")
INT8_PERCENTILE = 99.99
#: the convolution kernels of the int8 engines without TensorRT (engines.int8): auto (cudnn on a
#: GPU, emulate on a CPU), emulate, cudnn (cuDNN frontend graphs), triton (yolo_sm's Triton
#: implicit GEMM), intmm (torch._int_mm for the 1x1 convolutions, cudnn for the rest)
INT8_KERNELS = ("auto", "emulate", "cudnn", "triton", "intmm")
#: what an int8_kernels table times per convolution (fp16: the convolution int8 replaces;
#: triton_prequant: the separate quantiser, then the Triton kernel on int8) and per model
INT8_CONV_KERNELS = ("fp16", "cudnn", "intmm", "triton", "triton_prequant")
INT8_MODEL_KERNELS = ("fp16", "cudnn", "intmm", "triton")

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: exact rewrites of the model made before torch.compile, named after its mode with "+"
#: (``reduce-overhead+sep-pool``): ``sep-pool`` computes each stride-1 k x k max pool as a
#: 1 x k pool then a k x 1 one (collect.models.rewrites)
COMPILE_REWRITES = ("sep-pool",)

#: how a bench's pipeline row post-processes (yolo_sm.core.pipeline.PipelineConfig): full =
#: the full NMS; topk = the fixed-size NMS on each frame's k best candidates first; graph = that,
#: with everything after the copy to the device in one CUDA graph per slot
PIPELINE_MODES = ("full", "topk", "graph")


# Largest relative L2 error of the head output against the eager fp32 model that each precision
# may show before the engine is rejected. fp32 differs only by summation order / algorithm choice;
# tf32 keeps a 10-bit mantissa in the conv inputs; fp16/bf16 activations carry 11/8-bit mantissas
# through ~100 layers; int8 is calibrated quantisation.
TOLERANCE = {
    Precision.FP32: 1e-3,
    Precision.TF32: 2e-2,
    Precision.FP16: 2e-2,
    Precision.BF16: 1e-1,
    # int8: TensorRT's engines and yolo_sm's int8 convolutions (engines.int8), checked on the
    # photos; exact CPU emulation, 640 px, with the fast-engines bench's class prior: max
    # calibration 0.17 (w0.25), 0.092 (w0.5), 0.058 (w1.0); 99.99th percentile 0.28 (w0.25),
    # 0.17 (w0.5)
    Precision.INT8: 2.5e-1,
    # fp8: checked on photos (engines.base.photo_input), as int8 with the bench's class prior,
    # which shrinks the class scores so that the box outputs carry the norm: the H200 root's
    # numerics table (cuDNN FP8, 640 px) has 0.26 (w0.25), 0.15 (w0.5), 0.087 (w1.0) with the
    # prior and 0.28, 0.074, 0.011 without it; exact CPU emulation without the prior, 0.013
    # (w2.0)
    Precision.FP8: 1e-1,
}


# the stages one batch goes through, whose sum a 1-stream batch costs at least
PIPELINE_STAGES = ("h2d", "letterbox", "engine", "decode", "postprocess")


# A timed point whose GPU sat idle for more than this share of the forward (1 - the kernels'
# busy time / the forward's median), with more launches per forward than a CUDA graph's replay
# and its input copy (yolo_sm.analyse.hostbound.host_bound_rule), is host-bound: the
# launching thread, not the GPU, set its pace. 0.10 ties it to the 10 % re-measure tolerance: a
# point busy for at least 90 % of its forward cannot move by more than that whatever its host.
HOST_BOUND_IDLE_SHARE = 0.10

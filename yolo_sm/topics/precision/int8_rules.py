"""Which int8 convolution kernel is fastest (notebook 02's section on yolo_sm's own int8
kernels), as rules over :func:`yolo_sm.topics.precision.int8_kernels.facts`. A ratio above 1 means
the
kernel named first in the fact is faster; each threshold is where the sentence stops being true
of the data."""

from __future__ import annotations

from yolo_sm.report.rules import check_unique, rule_maker
from yolo_sm.topics.precision.int8_kernels import INT8_KERNELS

GROUP = "02_precision"
DS = (INT8_KERNELS,)


_make = rule_maker("int8_kernels", GROUP)


def _rule(id, statement, fact, op, threshold, unit="x", partly=None, datasets=DS):
    return _make(id, statement, fact, op, threshold, unit, datasets, partly)


RULES = check_unique(
    (
        _rule(
            "correct",
            "Every int8 kernel computes the int8 convolution exactly: its output lies within "
            "fp16 rounding of the int8 emulation on every convolution (largest distance)",
            "int8_kernels.conv_error_max",
            "<",
            5e-3,
            unit="",
        ),
        _rule(
            "triton_beats_cudnn",
            "yolo_sm's Triton implicit-GEMM kernel runs the model's int8 convolutions faster than "
            "cuDNN's int8 graphs at every measured width (summed over the convolutions, each "
            "timed alone; smallest ratio)",
            "int8_kernels.triton_over_cudnn_min",
            ">",
            1.0,
        ),
        _rule(
            "fused_quantisation_pays",
            "Quantising the input inside the Triton kernel is faster than the separate "
            "quantiser pass before it at every measured width (smallest ratio)",
            "int8_kernels.fused_over_prequant_min",
            ">",
            1.0,
        ),
        _rule(
            "int_mm_beats_cudnn",
            "torch._int_mm (cuBLASLt's int8 GEMM) runs the 1x1 convolutions faster than cuDNN's "
            "int8 graphs at every measured width (smallest ratio)",
            "int8_kernels.intmm_over_cudnn_min",
            ">",
            1.0,
        ),
        _rule(
            "best_per_conv_beats_cudnn",
            "Choosing the fastest int8 kernel per convolution beats cuDNN's graphs alone by at "
            "least 5 % at every measured width (smallest ratio)",
            "int8_kernels.best_over_cudnn_min",
            ">=",
            1.05,
            partly=1.0,
        ),
        _rule(
            "best_per_conv_beats_fp16",
            "With the fastest int8 kernel per convolution, the int8 convolutions take at most "
            "1/1.3 of fp16's time at every measured width (smallest ratio; partly: faster)",
            "int8_kernels.best_over_fp16_min",
            ">=",
            1.3,
            partly=1.0,
        ),
        _rule(
            "model_triton_beats_cudnn",
            "The int8 engine (one CUDA graph) runs faster with yolo_sm's Triton kernel than with "
            "cuDNN's graphs at every measured width (smallest img/s ratio)",
            "int8_kernels.model_triton_over_cudnn_min",
            ">",
            1.0,
        ),
        _rule(
            "model_int_mm_beats_cudnn",
            "The int8 engine runs faster with torch._int_mm for its 1x1 convolutions than with "
            "cuDNN's graphs for all of them at every measured width (smallest img/s ratio)",
            "int8_kernels.model_intmm_over_cudnn_min",
            ">",
            1.0,
        ),
        _rule(
            "ceiling_holds_for_cudnn",
            "cuDNN's fastest int8 convolution stays within the int8 matmul ceiling the "
            "ceilings step measured (the faster of torch._int_mm and cuDNN's int8 1x1 "
            "convolution as a GEMM, burst; above 100 % the ceiling is not one)",
            "int8_kernels.cudnn_peak_of_int8_ceiling_pct",
            "<=",
            100.0,
            unit="%",
            datasets=(*DS, "ceilings"),
        ),
        _rule(
            "triton_near_ceiling",
            "yolo_sm's Triton kernel reaches at least half the int8 matmul ceiling on its "
            "fastest convolution (quantising while it loads)",
            "int8_kernels.triton_peak_of_int8_ceiling_pct",
            ">=",
            50.0,
            unit="%",
            datasets=(*DS, "ceilings"),
        ),
    )
)

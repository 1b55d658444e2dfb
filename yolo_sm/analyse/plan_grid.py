"""Which sweep grid combinations cannot run, without torch (``core.sweep`` leaves them out)."""

from __future__ import annotations

from yolo_sm.contract.vocab import INT8_BACKENDS, INT8_BACKENDS_ONLY


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

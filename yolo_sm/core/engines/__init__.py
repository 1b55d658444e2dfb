"""Inference engines: ``build_engine(model, EngineConfig) -> Engine``.

Backends: eager (fp32/tf32/fp16/bf16, NCHW/NHWC), CUDA graph, torch.compile, ONNX Runtime,
TensorRT (lazy); int8/fp8 convolutions on eager and CUDA graph. Each engine is checked against
eager fp32 at build time (``engine.rel_err``).
"""

from __future__ import annotations

import torch

from yolo_sm.contract.vocab import COMPILE_MODES
from yolo_sm.core.engines.base import (
    Engine,
    NumericalMismatch,
    check_device,
    make_input,
    relative_l2,
    verify,
)
from yolo_sm.core.engines.config import (
    TOLERANCE,
    Backend,
    EngineConfig,
    Layout,
    Precision,
)
from yolo_sm.core.engines.onnx import build_onnxruntime
from yolo_sm.core.engines.tensorrt import build_tensorrt
from yolo_sm.core.engines.torch_backends import (
    build_compiled,
    build_copyfree,
    build_cudagraph,
    build_eager,
)

__all__ = [
    "Backend",
    "COMPILE_MODES",
    "Engine",
    "EngineConfig",
    "Layout",
    "NumericalMismatch",
    "Precision",
    "TOLERANCE",
    "build_engine",
    "check_device",
    "make_input",
    "relative_l2",
]


def build_engine(model: torch.nn.Module, config: EngineConfig) -> Engine:
    """Build the engine ``config`` describes for ``model`` (works on a copy).

    Raises NotAvailableError (backend/device missing), UserError (impossible combination) or
    NumericalMismatch (output off eager fp32 beyond tolerance; ``config.check=False`` skips it).
    """
    check_device(config.device)
    build = {
        Backend.EAGER: build_eager,
        Backend.CUDAGRAPH: build_cudagraph,
        Backend.COMPILE: build_compiled,
        Backend.ONNXRUNTIME: build_onnxruntime,
        Backend.TENSORRT: build_tensorrt,  # imports tensorrt itself, on use
        Backend.COPYFREE: build_copyfree,
    }[config.backend]
    engine = build(model, config)
    if config.check:
        try:
            verify(engine, model)
        except Exception:
            engine.close()
            raise
    return engine

"""Inference engines: ``build_engine(model, EngineConfig) -> Engine``, each checked against eager
fp32 at build time (``engine.rel_err``)."""

from __future__ import annotations

import functools

import torch

from yolo_sm.core.engines.base import Engine as Engine
from yolo_sm.core.engines.base import NumericalMismatch as NumericalMismatch
from yolo_sm.core.engines.base import make_input as make_input
from yolo_sm.core.engines.base import relative_l2 as relative_l2
from yolo_sm.core.engines.base import verify
from yolo_sm.core.engines.config import TOLERANCE as TOLERANCE
from yolo_sm.core.engines.config import Backend, EngineConfig
from yolo_sm.core.engines.config import Precision as Precision
from yolo_sm.core.engines.copyfree import CopyFree
from yolo_sm.core.engines.onnx import build_onnxruntime
from yolo_sm.core.engines.tensorrt import build_tensorrt
from yolo_sm.core.engines.torch_backends import build_compiled, build_cudagraph, build_eager
from yolo_sm.core.environment import check_device

BUILDERS = {
    Backend.EAGER: build_eager,
    Backend.CUDAGRAPH: build_cudagraph,
    Backend.COMPILE: build_compiled,
    Backend.ONNXRUNTIME: build_onnxruntime,
    Backend.TENSORRT: build_tensorrt,  # imports tensorrt itself, on use
    Backend.COPYFREE: functools.partial(build_cudagraph, wrap=CopyFree),  # captured as one graph
}


def build_engine(model: torch.nn.Module, config: EngineConfig) -> Engine:
    """The engine ``config`` describes for ``model`` (a copy); NotAvailableError, UserError or
    NumericalMismatch (off eager fp32 beyond tolerance; ``config.check=False`` skips it)."""
    check_device(config.device)
    engine = BUILDERS[config.backend](model, config)
    if config.check:
        try:
            verify(engine, model)
        except Exception:
            engine.close()
            raise
    return engine

"""The Engine type shared by every backend, and the numerical check against eager fp32."""

from __future__ import annotations

import contextlib
import copy
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from yolo_sm.core.engines.config import EngineConfig, Layout, Precision
from yolo_sm.core.images import load_images
from yolo_sm.core.models.common import calibration_batches

DTYPES = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
    Precision.INT8: torch.float16,  # int8 engines take half inputs (TensorRT mixes int8/fp16)
    Precision.FP8: torch.float16,  # fp8 convolutions, fp16 activations between them
}


class NumericalMismatch(RuntimeError):
    """An engine's output differs from the eager fp32 model beyond its precision's tolerance."""


@dataclass
class Engine:
    """A model ready for one input shape: ``engine(x)`` -> head output; ``rel_err`` vs eager fp32;
    ``capture``: the forward as plain launches a caller may capture in its own CUDA graph."""

    config: EngineConfig
    run: Callable[[torch.Tensor], torch.Tensor]
    description: str
    info: dict = field(default_factory=dict)
    rel_err: float | None = None
    close_fn: Callable[[], None] | None = None
    _input: torch.Tensor | None = None
    keepalive: tuple = ()  # what run needs alive but does not reference (a graph's weights)
    module: torch.nn.Module | None = None  # the prepared torch module, for layer hooks
    capture: Callable[[torch.Tensor], torch.Tensor] | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.run(x)

    @property
    def input_dtype(self) -> torch.dtype:
        return DTYPES[self.config.precision]

    def make_input(self, seed: int = 0) -> torch.Tensor:
        return make_input(self.config, seed)

    def close(self) -> None:
        if self.close_fn is not None:
            self.close_fn()
            self.close_fn = None
        self.keepalive = ()
        self.module = None
        self.capture = None


def as_input(x: torch.Tensor, config: EngineConfig) -> torch.Tensor:
    """``x`` with the engine's device, dtype and layout."""
    x = x.to(device=config.device, dtype=DTYPES[config.precision])
    nhwc = config.layout is Layout.NHWC
    return x.contiguous(memory_format=torch.channels_last) if nhwc else x


def make_input(config: EngineConfig, seed: int = 0) -> torch.Tensor:
    """A random image-like batch in [0, 1) for the engine (never zeros: they hide unwritten
    outputs and can run faster than real data)."""
    gen = torch.Generator(device=config.device).manual_seed(seed)  # drawn where it is used
    x = torch.rand(config.batch, 3, *config.input_hw, generator=gen, device=config.device)
    return as_input(x, config)


def photo_input(config: EngineConfig) -> torch.Tensor:
    """ultralytics' bundled photos (letterboxed, plain and mirrored) repeated to the engine's
    batch, dtype, device and layout: every engine's check input (noise saturates calibrations)."""
    if config.imgsz_hw is None or config.imgsz_hw[0] == config.imgsz_hw[1]:
        real = calibration_batches(config.imgsz)[0]
    else:  # a non-square input: the photos letterboxed to its (height, width)
        photos = torch.from_numpy(load_images(None, config.input_hw))
        real = torch.cat([photos, photos.flip(3)])
    return as_input(real[torch.arange(config.batch) % len(real)], config)


@contextlib.contextmanager
def numerics(config: EngineConfig):
    """Set cuDNN/cuBLAS TF32 flags for the precision while it runs (fp32: TF32 off)."""
    tf32 = config.precision is Precision.TF32
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    flags = [(cudnn, "allow_tf32", tf32), (matmul, "allow_tf32", tf32)]
    flags.append((cudnn, "benchmark", bool(config.cudnn_benchmark)))
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in flags]
    for obj, name, value in flags:
        setattr(obj, name, value)
    try:
        yield
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


def head_tensor(out) -> torch.Tensor:
    """The head output of a model call: ultralytics eval models return ``(y, raw)``."""
    while isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(out, dict):
        raise TypeError("model returned a dict; wrap it so that it returns a tensor")
    return out


def relative_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN or Inf anywhere gives ``inf``."""
    out = out.detach().to("cpu", torch.float64)
    ref = ref.detach().to("cpu", torch.float64)
    if out.shape != ref.shape:
        raise NumericalMismatch(f"output shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    if not torch.isfinite(out).all():
        return float("inf")
    denom = torch.linalg.vector_norm(ref)
    return float(torch.linalg.vector_norm(out - ref) / denom) if denom > 0 else float("inf")


_REFERENCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# what verify feeds the engine and its fp32 reference (recorded as check_input in sweep rows)
CHECK_INPUT = "photos"


def reference_output(
    model: torch.nn.Module, config: EngineConfig, x: torch.Tensor, source: int | str | None = None
) -> torch.Tensor:
    """Eager fp32 NCHW (TF32 off) output of ``model`` on ``x``, on the engine's device; cached
    per model when ``source`` names where ``x`` came from (a seed or :data:`CHECK_INPUT`)."""
    # the input's dtype is part of the key: an fp16 engine sees fp16-rounded pixels, and its
    # reference must see the same values, or the error would include the input's rounding
    key = (config.batch, config.input_hw, str(config.device), source, x.dtype)
    cache = _REFERENCES.setdefault(model, {})
    if source is not None and key in cache:
        return cache[key]
    ref_model = copy.deepcopy(model).float().to(config.device).eval()
    ref_cfg = replace(config, backend="eager", precision="fp32", cudnn_benchmark=False)
    with numerics(ref_cfg), torch.no_grad():
        out = head_tensor(ref_model(x.float().contiguous())).cpu()
    del ref_model
    if source is not None:
        cache[key] = out
    return out


def verify(engine: Engine, model: torch.nn.Module) -> Engine:
    """Set ``engine.rel_err`` on the bundled photos (:func:`photo_input`); raise
    NumericalMismatch beyond the precision's tolerance."""
    x = photo_input(engine.config)
    with torch.no_grad():
        out = head_tensor(engine(x)).clone()
    ref = reference_output(model, engine.config, x, CHECK_INPUT)
    engine.rel_err = relative_l2(out, ref)
    tol = engine.config.tolerance
    if not engine.rel_err <= tol:
        raise NumericalMismatch(
            f"{engine.description}: relative L2 error {engine.rel_err:.3g} vs eager fp32 exceeds "
            f"the {engine.config.precision.value} tolerance {tol:g}"
        )
    return engine

"""FP8 E4M3 convolutions: weights per-output-channel ``amax / 448``, activations per-conv
``amax / 448`` over the photos; kernels ``emulate`` (anywhere) and ``cudnn`` (fused epilogue)."""

from __future__ import annotations

import os

import torch
from torch import nn

from yolo_sm.core.engines.qconv import (
    CudnnQuantConv,
    GraphFormat,
    QuantConv,
    import_cudnn,
    quantize_launch,
    quantize_model,
    require_gpu,
)
from yolo_sm.core.engines.qconv import calibration_inputs as calibration_inputs
from yolo_sm.core.engines.qconv import eligible_convs as eligible_convs
from yolo_sm.core.engines.qconv import fallbacks as fallbacks

E4M3_MAX = 448.0
# ranked cuDNN plans each FP8 conv times on first call (0: heuristic's first); YOLO_SM_FP8_PLANS
AUTOTUNE_PLANS = int(os.environ.get("YOLO_SM_FP8_PLANS", "4"))
_TUNED: dict = {}  # graph signature -> index of the fastest plan


def fake_quant(x: torch.Tensor, scale) -> torch.Tensor:
    """``x`` rounded to E4M3 at ``scale`` (saturating at +-448 x scale), in ``x``'s dtype."""
    s = torch.as_tensor(scale, dtype=torch.float32, device=x.device)
    q = (x.float() / s).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return (q.float() * s).to(x.dtype)


def weight_scales(w: torch.Tensor) -> torch.Tensor:
    """Per-output-channel E4M3 scales of a conv weight (K, C, R, S)."""
    return w.detach().float().abs().amax(dim=(1, 2, 3)).clamp(min=1e-12) / E4M3_MAX


def quantize_e4m3(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``x / scale`` saturated to +-448 and cast to E4M3 in ``x``'s memory format (Triton on a
    GPU, torch ops elsewhere)."""
    y = quantize_launch(x, torch.float8_e4m3fn, 1.0 / scale, E4M3_MAX, False)
    if y is None:
        y = (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return y


#: the FP8 graph: E4M3 operands, fp32 accumulation, fused epilogue writing the engine's dtype
FORMAT = GraphFormat(
    operand="FP8_E4M3",
    compute="FLOAT",
    quantize=quantize_e4m3,
    plans=lambda: AUTOTUNE_PLANS,
    tuned=_TUNED,
)


class Fp8Conv(QuantConv):
    """A Conv2d whose input and weight are E4M3 (per-tensor input scale, per-channel weight
    scales); the output, bias and everything after it stay in the input's dtype."""

    WEIGHT = "weight_fp8"

    def __init__(
        self, conv: nn.Conv2d, input_scale: float, kernel: str = "emulate", silu: bool = False
    ):
        ws = weight_scales(conv.weight)
        wq = (conv.weight.detach().float() / ws[:, None, None, None]).to(torch.float8_e4m3fn)
        super().__init__(conv, input_scale, kernel, silu, wq, ws)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.kernel == "cudnn" and x.is_cuda):
            return self._fp16(fake_quant(x, self.input_scale))  # the exact emulation
        plan = self._plan(x.shape, x.dtype, x.device)
        return self._fp16(x) if plan is None else plan(x)  # declined: fp16, fp8-rounded weight

    def _build(self, x: torch.Tensor) -> CudnnQuantConv | None:
        try:
            return CudnnQuantConv(self, x, FORMAT, "precision fp8")
        except Exception as e:  # noqa: BLE001 - cuDNN declines some shapes: say why
            self.fallback = f"{type(e).__name__}: {e}"[:300]
            return None


def quantize_convs(model: nn.Module, batches, kernel: str = "emulate") -> dict:
    """Replace each eligible conv of ``model`` in place by a calibrated :class:`Fp8Conv`; returns
    the engine's ``fp8_kernel`` and ``fp8_convs``."""

    def make(conv, amax, silu):
        return Fp8Conv(conv, amax / E4M3_MAX, kernel, silu=silu)

    n = quantize_model(model, batches, make, fuse=kernel == "cudnn")
    return {"fp8_kernel": kernel, "fp8_convs": n}


def choose_kernel(device: str) -> str:
    """emulate on a CPU, cudnn on a GPU of compute capability >= 8.9 with the cuDNN frontend."""
    if not str(device).startswith("cuda"):
        return "emulate"
    require_gpu(device, "precision fp8", (8, 9), "FP8 tensor cores")
    import_cudnn("precision fp8")
    return "cudnn"

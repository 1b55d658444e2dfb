"""FP8 E4M3 convolutions with calibrated scales (precision ``fp8``).

Every ultralytics ``Conv`` convolution but the first; head predictions and DFL stay fp16.
Weights: per-output-channel ``amax / 448``; activations: per-conv ``amax / 448`` over the
calibration photos. Kernels: ``emulate`` (E4M3 rounding in float, runs anywhere) and ``cudnn``
(Triton quantiser + one cuDNN frontend graph per conv with fused de-scale, bias, SiLU; a conv
cuDNN declines runs fp16 and is counted in ``Fp8Conv.fallback``).
"""

from __future__ import annotations

import os

import torch
from torch import nn

from yolo_sm.contract.errors import NotAvailableError
from yolo_sm.core.engines.qconv import (
    CudnnQuantConv,
    GraphFormat,
    calibrate_inputs,
    calibration_inputs,
    eligible_convs,
    fallbacks,
)

__all__ = [
    "E4M3_MAX",
    "KERNELS",
    "Fp8Conv",
    "calibrate_inputs",
    "calibration_inputs",
    "choose_kernel",
    "eligible_convs",
    "fake_quant",
    "fallbacks",
    "quantize_convs",
    "quantize_e4m3",
    "weight_scales",
]

E4M3_MAX = 448.0
KERNELS = ("emulate", "cudnn")


def fake_quant(x: torch.Tensor, scale) -> torch.Tensor:
    """``x`` rounded to E4M3 at ``scale`` (saturating at +-448 x scale), in ``x``'s dtype."""
    s = torch.as_tensor(scale, dtype=torch.float32, device=x.device)
    q = (x.float() / s).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return (q.float() * s).to(x.dtype)


def weight_scales(w: torch.Tensor) -> torch.Tensor:
    """Per-output-channel E4M3 scales of a conv weight (K, C, R, S)."""
    return w.detach().float().abs().amax(dim=(1, 2, 3)).clamp(min=1e-12) / E4M3_MAX


class Fp8Conv(nn.Module):
    """A Conv2d whose input and weight are E4M3 (per-tensor input scale, per-channel weight
    scales); the output, bias and everything after it stay in the input's dtype."""

    def __init__(
        self, conv: nn.Conv2d, input_scale: float, kernel: str = "emulate", silu: bool = False
    ):
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"unknown fp8 kernel {kernel!r}: choose one of {KERNELS}")
        self.kernel = kernel
        self.silu = silu  # the block's SiLU runs here (fused into cuDNN's epilogue)
        self.fallback: str | None = None  # why cuDNN declined this conv, if it did
        self._plans: dict = {}
        self.stride, self.padding = conv.stride, conv.padding
        self.dilation, self.groups = conv.dilation, conv.groups
        self.in_channels, self.out_channels = conv.in_channels, conv.out_channels
        w = conv.weight.detach()
        ws = weight_scales(w)
        wq = (w.float() / ws[:, None, None, None]).to(torch.float8_e4m3fn)
        self.register_buffer("weight_fp8", wq)
        self.register_buffer("weight_scale", ws)
        self.register_buffer("input_scale", torch.tensor(float(input_scale)))
        self.register_buffer(
            "weight", (wq.float() * ws[:, None, None, None]).to(w.dtype), persistent=False
        )
        self.bias = None if conv.bias is None else nn.Parameter(conv.bias.detach().clone())

    @property
    def weight_q(self) -> torch.Tensor:
        """The quantised weight the cuDNN graph reads (qconv.CudnnQuantConv)."""
        return self.weight_fp8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel == "cudnn" and x.is_cuda:
            key = (tuple(x.shape), x.dtype, x.device)
            plan = self._plans.get(key)
            if plan is None and self.fallback is None:
                try:
                    plan = self._plans[key] = _CudnnFp8Conv(self, x)
                except Exception as e:  # noqa: BLE001 - cuDNN declines some shapes: say why
                    self.fallback = f"{type(e).__name__}: {e}"[:300]
            if plan is not None:
                return plan(x)
            xin = x  # declined: plain fp16 conv with the fp8-rounded weight
        else:
            xin = fake_quant(x, self.input_scale)  # the exact emulation
        bias = None if self.bias is None else self.bias.to(x.dtype)
        y = nn.functional.conv2d(
            xin,
            self.weight.to(x.dtype),
            bias,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        )
        return nn.functional.silu(y) if self.silu else y

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, stride={self.stride}, "
            f"input_scale={float(self.input_scale):.3g}, kernel={self.kernel}, silu={self.silu}"
        )


def quantize_e4m3(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``x / scale`` saturated to +-448 and cast to E4M3, same memory format as ``x``: one Triton
    kernel on a GPU (torch's ops would take three passes), torch ops elsewhere."""
    if x.is_cuda:
        kernel = _triton_quantize()
        if kernel is not None:
            if not (x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last)):
                x = x.contiguous(memory_format=torch.channels_last)
            out = torch.empty_like(x, dtype=torch.float8_e4m3fn)
            n = x.numel()
            kernel[((n + 4095) // 4096,)](x, out, n, 1.0 / scale, BLOCK=4096)
            return out
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


_TRITON: list = []


def _triton_quantize():
    """The Triton quantisation kernel (elementwise over the tensor's storage), or None."""
    if not _TRITON:
        try:
            import triton
            import triton.language as tl

            @triton.jit
            def _quantize(x_ptr, y_ptr, n, inv_scale, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                mask = offs < n
                v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) * inv_scale
                v = tl.minimum(tl.maximum(v, -448.0), 448.0)
                tl.store(y_ptr + offs, v.to(tl.float8e4nv), mask=mask)

            _TRITON.append(_quantize)
        except Exception:  # noqa: BLE001 - no Triton: torch ops do the same, slower
            _TRITON.append(None)
    return _TRITON[0]


# how many of cuDNN's ranked plans each FP8 convolution times on its first call (per input
# shape) before keeping the fastest; 0 keeps the heuristic's first choice. The H200 probe saw
# the heuristic's FP8 kernels at 0.6-2.9x the fp16 convolution depending on the shape, and the
# engine's FP8 convolutions at 2x the fp16 ones in total (tools/fp8_probe.py,
# h200/trace_fp8_w1_b64).
# Building a plan can mean a runtime compile (NVRTC) of a fused kernel, so tuning stops trying
# further plans of a convolution once AUTOTUNE_SECONDS have passed on it, and a shape tuned once
# in this process reuses its choice (_TUNED). YOLO_SM_FP8_PLANS overrides the plan count.
AUTOTUNE_PLANS = int(os.environ.get("YOLO_SM_FP8_PLANS", "4"))
AUTOTUNE_SECONDS = 1.0
_TUNED: dict = {}  # graph signature -> index of the fastest plan

#: the FP8 graph (qconv.CudnnQuantConv): E4M3 operands, fp32 accumulation, fused epilogue
#: writing the engine's dtype
FORMAT = GraphFormat(
    operand="FP8_E4M3",
    compute="FLOAT",
    quantize=lambda x, s: quantize_e4m3(x, s),
    plans=lambda: AUTOTUNE_PLANS,
    seconds=AUTOTUNE_SECONDS,
    tuned=_TUNED,
)


def _CudnnFp8Conv(mod: Fp8Conv, x: torch.Tensor) -> CudnnQuantConv:
    """One cuDNN frontend graph: E4M3 image x E4M3 weight (NHWC), fp32 accumulation, then
    ``y * (input_scale * weight_scale[k]) + bias`` (and SiLU) written in the input's dtype."""
    return CudnnQuantConv(mod, x, FORMAT, "precision fp8")


def quantize_convs(model: nn.Module, batches, kernel: str = "emulate") -> dict:
    """Replace each eligible convolution of ``model`` (in place) by an :class:`Fp8Conv` with
    calibrated scales; returns a summary for the engine's info."""
    convs = eligible_convs(model)
    amax = calibrate_inputs(model, convs, batches)
    for (parent, attr, conv), a in zip(convs, amax, strict=True):
        fuse = kernel == "cudnn" and isinstance(parent.act, nn.SiLU)
        setattr(parent, attr, Fp8Conv(conv, max(a, 1e-12) / E4M3_MAX, kernel, silu=fuse))
        if fuse:
            parent.act = nn.Identity()
    total = sum(1 for m in model.modules() if isinstance(m, (nn.Conv2d, Fp8Conv)))
    return {
        "fp8_kernel": kernel,
        "fp8_convs": len(convs),
        "convs": total,
        "fp8_calibration": "max |input| over ultralytics' photos (letterboxed, mirrored)",
    }


def choose_kernel(device: str) -> str:
    """The kernel for ``device``: emulation on the CPU; cuDNN FP8 graphs on a GPU of compute
    capability 8.9 or newer (FP8 tensor cores) with the cuDNN frontend installed."""

    if not str(device).startswith("cuda"):
        return "emulate"
    if not torch.cuda.is_available():
        raise NotAvailableError(f"precision fp8 on {device}: no CUDA device here")
    if torch.cuda.get_device_capability(torch.device(device)) < (8, 9):
        raise NotAvailableError("precision fp8 needs FP8 tensor cores (compute capability 8.9+)")
    try:
        import cudnn  # noqa: F401
    except ImportError:
        raise NotAvailableError(
            "precision fp8 on a GPU needs NVIDIA's cuDNN frontend (FP8 convolution graphs): "
            "pip install nvidia-cudnn-frontend"
        ) from None
    return "cudnn"

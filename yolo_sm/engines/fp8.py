"""The 8-bit path: FP8 E4M3 convolutions with calibrated scales (precision ``fp8``).

Which convolutions: every convolution of an ultralytics ``Conv`` block (conv + SiLU, BatchNorm
fused) except the first (3 input channels: tiny reduction, and the image's scale is known), so
the hidden convolutions of the backbone, neck and head. The head's final prediction
convolutions (plain ``nn.Conv2d``) and the fixed DFL convolution stay in fp16, as is usual for
quantised detectors.

Scales (E4M3 holds magnitudes up to 448):
* weights: one scale per output channel, ``amax / 448`` over that filter;
* activations: one scale per convolution input, ``amax / 448`` of that input over calibration
  forwards on real images (ultralytics' bundled photos, letterboxed, as they are and mirrored:
  :func:`yolo_sm.models.common.calibration_batches`), max calibration.

Kernels: ``emulate`` quantises and de-quantises in the engine's float dtype around an ordinary
convolution (E4M3 rounding and saturation exactly, fp16/fp32 arithmetic): it runs anywhere and is
what the numerical checks and the CPU tests use; it is not faster. A GPU kernel (cuDNN frontend
FP8 graphs or ``torch._scaled_mm``) is chosen after ``tools/fp8_probe.py`` has measured on the
H200 which of them runs; until then a CUDA engine says so instead of pretending.
"""

from __future__ import annotations

import torch
from torch import nn

E4M3_MAX = 448.0
KERNELS = ("emulate",)


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

    def __init__(self, conv: nn.Conv2d, input_scale: float, kernel: str = "emulate"):
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"unknown fp8 kernel {kernel!r}: choose one of {KERNELS}")
        self.kernel = kernel
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xq = fake_quant(x, self.input_scale)
        w = self.weight.to(x.dtype)
        b = None if self.bias is None else self.bias.to(x.dtype)
        return nn.functional.conv2d(xq, w, b, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, stride={self.stride}, "
            f"input_scale={float(self.input_scale):.3g}, kernel={self.kernel}"
        )


def eligible_convs(model: nn.Module) -> list[tuple[nn.Module, str, nn.Conv2d]]:
    """(parent, attribute, conv) of each convolution the fp8 path quantises (module docstring)."""
    out = []
    for parent in model.modules():
        conv = getattr(parent, "conv", None)
        is_block = isinstance(conv, nn.Conv2d) and hasattr(parent, "act")  # ultralytics Conv
        if is_block and conv.in_channels > 3 and conv.groups == 1:
            out.append((parent, "conv", conv))
    return out


@torch.no_grad()
def calibrate_inputs(model: nn.Module, convs, batches) -> list[float]:
    """Per conv (same order as ``convs``): max |input| over forwards of ``model`` on ``batches``."""
    amax = [0.0] * len(convs)
    index = {id(c): i for i, (_, _, c) in enumerate(convs)}

    def hook(mod, args):
        i = index[id(mod)]
        amax[i] = max(amax[i], float(args[0].detach().abs().max()))

    handles = [c.register_forward_pre_hook(hook) for _, _, c in convs]
    try:
        for x in batches:
            p = next(model.parameters())
            model(x.to(device=p.device, dtype=p.dtype))
    finally:
        for h in handles:
            h.remove()
    return amax


def quantize_convs(model: nn.Module, batches, kernel: str = "emulate") -> dict:
    """Replace each eligible convolution of ``model`` (in place) by an :class:`Fp8Conv` with
    calibrated scales; returns a summary for the engine's info."""
    convs = eligible_convs(model)
    amax = calibrate_inputs(model, convs, batches)
    for (parent, attr, conv), a in zip(convs, amax, strict=True):
        setattr(parent, attr, Fp8Conv(conv, max(a, 1e-12) / E4M3_MAX, kernel))
    total = sum(1 for m in model.modules() if isinstance(m, (nn.Conv2d, Fp8Conv)))
    return {
        "fp8_kernel": kernel,
        "fp8_convs": len(convs),
        "convs": total,
        "fp8_calibration": "max |input| over ultralytics' photos (letterboxed, mirrored)",
    }


def calibration_inputs(imgsz: int) -> list[torch.Tensor]:
    """The real-image calibration batch (no noise: activation ranges come from photos)."""
    from yolo_sm.models.common import calibration_batches

    return calibration_batches(imgsz)[:1]


def choose_kernel(device: str) -> str:
    """The kernel for ``device``: emulation on the CPU; on a GPU, none yet (see module doc)."""
    from yolo_sm.errors import NotAvailableError

    if str(device).startswith("cuda"):
        raise NotAvailableError(
            "precision fp8 has no GPU kernel in yolo_sm yet (only the CPU emulation that "
            "measures its numerical error); run tools/fp8_probe.py on the GPU to see which FP8 "
            "convolution path works there"
        )
    return "emulate"

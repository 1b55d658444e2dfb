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
  :func:`yolo_sm.collect.models.common.calibration_batches`), max calibration.

Kernels:
* ``emulate`` quantises and de-quantises in the engine's float dtype around an ordinary
  convolution (E4M3 rounding and saturation exactly, fp16/fp32 arithmetic): it runs anywhere and
  is what the numerical checks and the CPU tests use; it is not faster.
* ``cudnn`` (CUDA): the input is quantised to E4M3 by one Triton kernel (scale, saturate, cast),
  then one cuDNN frontend graph per convolution and input shape runs the FP8 tensor-core
  convolution with fp32 accumulation and a fused epilogue (per-channel de-scale, bias, SiLU) that
  writes fp16. Chosen after ``tools/fp8_probe.py`` measured on the H200 (cuDNN 9.19, frontend
  1.32): cuDNN FP8 convs ran 0.6-2.9x the fp16 conv+bias+SiLU on YOLOv8 w1.0 batch-64 shapes and
  ``torch._scaled_mm`` 2.1-2.2x on 1x1 shapes, while the separate input quantisation costs
  0.04-0.2 ms a conv. Needs the ``nvidia-cudnn-frontend`` package (imported lazily); without it
  a CUDA fp8 engine says so. A convolution cuDNN declines runs in fp16 instead and is counted
  (``Fp8Conv.fallback``).
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn

from yolo_sm.collect.models.common import calibration_batches
from yolo_sm.contract.errors import NotAvailableError

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


_HANDLES: dict = {}
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


class _CudnnFp8Conv:
    """One cuDNN frontend graph: E4M3 image x E4M3 weight (NHWC), fp32 accumulation, then
    ``y * (input_scale * weight_scale[k]) + bias`` (and SiLU) written in the input's dtype."""

    def __init__(self, mod: Fp8Conv, x: torch.Tensor):
        try:
            import cudnn
        except ImportError as e:
            raise NotAvailableError(
                "precision fp8 on a GPU needs NVIDIA's cuDNN frontend: "
                "pip install nvidia-cudnn-frontend"
            ) from e
        dt = cudnn.data_type
        io = {torch.float16: dt.HALF, torch.bfloat16: dt.BFLOAT16}[x.dtype]
        dev = x.device
        if dev not in _HANDLES:
            _HANDLES[dev] = cudnn.create_handle()
        self.cudnn, self.handle = cudnn, _HANDLES[dev]
        n, _, h, w = x.shape
        k, _, r, s = mod.weight_fp8.shape
        cl = torch.channels_last
        self.wq = mod.weight_fp8.to(dev).contiguous(memory_format=cl)
        self.scale = (
            (mod.input_scale.float() * mod.weight_scale.float()).to(dev).reshape(1, k, 1, 1)
        ).contiguous(memory_format=cl)
        self.bias = None
        if mod.bias is not None:
            self.bias = mod.bias.detach().float().to(dev).reshape(1, k, 1, 1)
            self.bias = self.bias.contiguous(memory_format=cl)
        self.input_scale = float(mod.input_scale)
        g = cudnn.pygraph(
            io_data_type=io,
            intermediate_data_type=dt.FLOAT,
            compute_data_type=dt.FLOAT,
            handle=self.handle,
        )
        xs = torch.empty((n, x.shape[1], h, w), dtype=torch.float8_e4m3fn, device="meta")
        xs = xs.contiguous(memory_format=cl)

        def tensor(name, t, dtype):
            return g.tensor(name=name, dim=list(t.shape), stride=list(t.stride()), data_type=dtype)

        self.X = tensor("X", xs, dt.FP8_E4M3)
        self.W = tensor("W", self.wq, dt.FP8_E4M3)
        y = g.conv_fprop(
            image=self.X,
            weight=self.W,
            padding=list(mod.padding),
            stride=list(mod.stride),
            dilation=list(mod.dilation),
            compute_data_type=dt.FLOAT,
        )
        self.S = tensor("S", self.scale, dt.FLOAT)
        y = g.scale(input=y, scale=self.S)
        self.B = None
        if self.bias is not None:
            self.B = tensor("B", self.bias, dt.FLOAT)
            y = g.bias(input=y, bias=self.B)
        if mod.silu:
            y = g.swish(input=y)
        y.set_output(True).set_data_type(io)
        self.Y = y
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
        g.check_support()
        self.graph = g
        (pr, pc), (sr, sc), (dr, dc) = mod.padding, mod.stride, mod.dilation
        ho = (h + 2 * pr - dr * (r - 1) - 1) // sr + 1
        wo = (w + 2 * pc - dc * (s - 1) - 1) // sc + 1
        self.out_shape, self.dtype = (n, k, ho, wo), x.dtype
        self.tuning: list[tuple[str, float]] = []  # (plan name, ms) of each plan timed
        self.plan_index = None  # the tuned plan execute runs; None: cuDNN's first buildable one
        key = (tuple(x.shape), x.dtype, k, r, s, mod.padding, mod.stride, mod.dilation)
        key += (self.bias is not None, bool(mod.silu), dev)
        capturing = torch.cuda.is_current_stream_capturing()
        if key in _TUNED:
            self.plan_index = _TUNED[key]
            g.build_plan_at_index(self.plan_index)
        elif AUTOTUNE_PLANS > 0 and not capturing:
            self._autotune(x, AUTOTUNE_PLANS)
            if self.plan_index is not None:
                _TUNED[key] = self.plan_index
        else:
            g.build_plans()
        if self.plan_index is None:
            self.workspace = g.get_workspace_size()
        else:
            self.workspace = g.get_workspace_size_plan_at_index(self.plan_index)

    def _autotune(self, x: torch.Tensor, limit: int, reps: int = 5) -> None:
        """Build and time up to ``limit`` of the ranked plans on an input of this shape (random
        E4M3 values) and select the fastest; records every timing in ``self.tuning``. Plans
        that do not build or run are skipped; if none does, cuDNN's own walk decides."""
        g, dev = self.graph, x.device
        xq = quantize_e4m3(torch.randn_like(x, memory_format=torch.channels_last), 1 / 64)
        y = torch.empty(
            self.out_shape, dtype=self.dtype, device=dev, memory_format=torch.channels_last
        )
        feeds = {self.X: xq, self.W: self.wq, self.S: self.scale, self.Y: y}
        if self.B is not None:
            feeds[self.B] = self.bias
        stream = torch.cuda.current_stream(dev)
        self.cudnn.set_stream(self.handle, stream.cuda_stream)
        best, t0 = None, time.perf_counter()
        for i in range(min(g.get_execution_plan_count(), limit)):
            if best is not None and time.perf_counter() - t0 > AUTOTUNE_SECONDS:
                break
            try:
                g.build_plan_at_index(i)
                ws = torch.empty(
                    max(g.get_workspace_size_plan_at_index(i), 1), dtype=torch.uint8, device=dev
                )
                for _ in range(2):  # warm-up (lazy loading, JIT)
                    g.execute_plan_at_index(feeds, ws, i, handle=self.handle)
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(stream)
                for _ in range(reps):
                    g.execute_plan_at_index(feeds, ws, i, handle=self.handle)
                b.record(stream)
                b.synchronize()
            except Exception:  # noqa: BLE001 - a plan that declines is skipped
                continue
            ms = a.elapsed_time(b) / reps
            self.tuning.append((g.get_plan_name_at_index(i), ms))
            if best is None or ms < best[0]:
                best = (ms, i)
        if best is None:
            g.build_plans()
        else:
            self.plan_index = best[1]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=torch.channels_last)  # the graph's image layout
        xq = quantize_e4m3(x, self.input_scale)
        y = torch.empty(
            self.out_shape, dtype=self.dtype, device=x.device, memory_format=torch.channels_last
        )
        feeds = {self.X: xq, self.W: self.wq, self.S: self.scale, self.Y: y}
        if self.B is not None:
            feeds[self.B] = self.bias
        ws = torch.empty(max(self.workspace, 1), dtype=torch.uint8, device=x.device)
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream(x.device).cuda_stream)
        if self.plan_index is None:
            self.graph.execute(feeds, ws, handle=self.handle)
        else:
            self.graph.execute_plan_at_index(feeds, ws, self.plan_index, handle=self.handle)
        return y


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


def calibration_inputs(imgsz: int) -> list[torch.Tensor]:
    """The real-image calibration batch (no noise: activation ranges come from photos)."""

    return calibration_batches(imgsz)[:1]


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


def fallbacks(model: nn.Module) -> dict[str, str]:
    """Module name -> why cuDNN declined it, for the fp8 convolutions that run in fp16."""
    return {n: m.fallback for n, m in model.named_modules() if getattr(m, "fallback", None)}

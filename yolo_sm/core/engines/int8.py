"""INT8 convolutions without TensorRT: per-channel weights, per-conv activation scale, int32
accumulation; kernels ``emulate``, ``cudnn`` (int8 hand-offs), ``triton`` and ``intmm``."""

from __future__ import annotations

import copy
import itertools
import math
import os
import weakref
from collections import Counter, defaultdict

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from yolo_sm.contract.errors import NotAvailableError
from yolo_sm.contract.vocab import INT8_PERCENTILE
from yolo_sm.core.engines import int8_triton
from yolo_sm.core.engines.qconv import (
    CL,
    CudnnQuantConv,
    GraphFormat,
    QuantConv,
    abs_max,
    conv_out_hw,
    import_cudnn,
    quantize_launch,
    quantize_model,
    require_gpu,
)
from yolo_sm.core.engines.qconv import fallbacks as fallbacks

INT8_MAX = 127.0
#: cuDNN's int8 NHWC convolutions need input and output channel counts that are multiples of 4
CHANNEL_MULTIPLE = 4
# ranked cuDNN plans each int8 graph times on first build (as fp8's); YOLO_SM_INT8_PLANS
AUTOTUNE_PLANS = int(os.environ.get("YOLO_SM_INT8_PLANS", "4"))
_TUNED: dict = {}  # graph signature -> index of the fastest plan


def quantize_values(x: torch.Tensor, scale) -> torch.Tensor:
    """``round(x / scale)`` in [-127, 127] as float32, halves away from zero (as the Triton
    quantiser rounds)."""
    inv = 1.0 / torch.as_tensor(scale, dtype=torch.float32, device=x.device)
    v = (x.float() * inv).clamp(-INT8_MAX, INT8_MAX)
    return torch.where(v >= 0, v + 0.5, v - 0.5).trunc()


def weight_scales(w: torch.Tensor) -> torch.Tensor:
    """Per-output-channel int8 scales of a conv weight (K, C, R, S): ``amax / 127``."""
    return w.detach().float().abs().amax(dim=(1, 2, 3)).clamp(min=1e-12) / INT8_MAX


def percentile_abs(x: torch.Tensor, percentile: float) -> float:
    """The ``percentile``-th percentile of |x| (the smallest value at or above that share of
    the elements; 100 is max |x|)."""
    a = x.detach().abs().float().flatten()
    k = min(a.numel(), max(1, math.ceil(a.numel() * float(percentile) / 100.0)))
    return float(a.kthvalue(k).values) if k < a.numel() else float(a.max())


def calibration_stat(method: str, percentile: float = INT8_PERCENTILE):
    """The statistic (``max`` or ``percentile``) of a conv input that sets ``input_scale``."""
    return abs_max if method == "max" else lambda x: percentile_abs(x, percentile)


def quantize_int8(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``round(x / scale)`` (halves away from zero) saturated to +-127 as int8 in ``x``'s memory
    format (Triton on a GPU, torch ops elsewhere)."""
    y = quantize_launch(x, torch.int8, int8_triton.inverse_scale(scale), INT8_MAX, True)
    return quantize_values(x, scale).to(torch.int8) if y is None else y


def _format(output: str, fused: bool) -> GraphFormat:
    return GraphFormat(
        "INT8", "INT32", quantize_int8, lambda: AUTOTUNE_PLANS, _TUNED, output, fused, 1 / 16
    )


def graph_formats(handoff: bool = False) -> list[tuple[str, GraphFormat]]:
    """cuDNN graphs an int8 conv tries, in order: ``fused_int8`` (hand-off only), fused epilogue
    writing fp16, the bare conv (FLOAT) with torch's epilogue."""
    first = [("fused_int8", _format("INT8", True))] if handoff else []
    return [*first, ("fused", _format("HALF", True)), ("unfused", _format("FLOAT", False))]


#: the live int8 convolutions by the number the custom op :func:`int8_conv` names them with
_CONVS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_NUMBERS = itertools.count()


@torch.library.custom_op("yolo_sm::int8_conv", mutates_args=())
def int8_conv(
    xq: torch.Tensor,
    conv: int,
    out_channels: int,
    kernel_size: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    dtype: torch.dtype,
    output: str = "engine",
) -> torch.Tensor:
    """Int8 convolution number ``conv`` on int8-valued ``xq``, as one opaque op for
    torch.compile; output in ``dtype``, or int8 where ``output`` is ``int8`` (a hand-off)."""
    y = _CONVS[conv].run_quantized(xq, dtype)
    return y.contiguous(memory_format=CL)  # the strides its fake promises


@int8_conv.register_fake
def _int8_conv_fake(
    xq, conv, out_channels, kernel_size, stride, padding, dilation, dtype, output="engine"
):
    n, _, h, w = xq.shape
    hw = conv_out_hw(h, w, kernel_size, padding, stride, dilation)
    out = torch.int8 if output == "int8" else dtype
    return xq.new_empty((n, out_channels, *hw), dtype=out).contiguous(memory_format=CL)


class Int8Conv(QuantConv):
    """A Conv2d whose input (per-tensor scale) and weight (per-output-channel scales) are int8,
    accumulated in int32; the output, bias and everything after it in the input's dtype."""

    WEIGHT = "weight_int8"

    def __init__(
        self, conv: nn.Conv2d, input_scale: float, kernel: str = "emulate", silu: bool = False
    ):
        ws = weight_scales(conv.weight)
        wq = quantize_values(conv.weight.detach(), ws[:, None, None, None]).to(torch.int8)
        super().__init__(conv, input_scale, kernel, silu, wq, ws)
        self.graph_modes: dict = {}  # input shape -> "fused" / "unfused" (cuDNN graphs)
        self.ran: str | None = None  # "triton" / "intmm" once that kernel ran this conv
        self.declined: list[str] = []  # why cuDNN declined a graph that was tried
        self._packed: dict = {}  # device -> (weight for the Triton / _int_mm kernel, scale, bias)
        self.number = next(_NUMBERS)  # how the custom op int8_conv names this convolution
        _CONVS[self.number] = self
        self.output_scale: float | None = None  # set by link_handoffs: the output is int8

    def __deepcopy__(self, memo):
        """A copy (an engine's prepared model) is a convolution of its own for the custom op."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items()})
        new.number = next(_NUMBERS)
        _CONVS[new.number] = new
        return new

    def _build(self, x: torch.Tensor):
        """The first cuDNN graph of :func:`graph_formats` that builds for ``x``'s shape, or
        None (then ``fallback`` says why)."""
        if self.in_channels % CHANNEL_MULTIPLE or self.out_channels % CHANNEL_MULTIPLE:
            self.fallback = (
                f"channels {self.in_channels}->{self.out_channels} are not multiples of "
                f"{CHANNEL_MULTIPLE} (cuDNN int8 NHWC)"
            )
            return None
        reasons = []
        for mode, fmt in graph_formats(handoff=self.output_scale is not None):
            try:
                plan = CudnnQuantConv(self, x, fmt, "precision int8")
            except NotAvailableError:
                raise
            except Exception as e:  # noqa: BLE001 - cuDNN declines some graphs: say why
                reasons.append(f"{mode}: {type(e).__name__}: {e}"[:300])
                continue
            self.graph_modes[tuple(x.shape)] = mode
            self.declined += reasons
            return plan
        self.declined += reasons
        self.fallback = "; ".join(reasons)[:300]
        return None

    def _operands(self, x: torch.Tensor, layout: str):
        """(weight, per-channel float32 scale, float32 bias or None) on ``x``'s device for the
        ``triton`` kernel (``layout`` packed: (K, R, S, C)) or ``_int_mm`` (ck: (C, K))."""
        key = (x.device, layout)
        if key not in self._packed:
            wq = self.weight_int8.to(x.device)
            if layout == "packed":
                w = int8_triton.packed_weight(wq)
            else:
                w = wq.reshape(self.out_channels, self.in_channels).t()
            scale = (self.input_scale.float() * self.weight_scale.float()).to(x.device)
            bias = None if self.bias is None else self.bias.detach().float().to(x.device)
            self._packed[key] = (w, scale.contiguous(), bias)
        return self._packed[key]

    def _own_kernel(self, x: torch.Tensor) -> torch.Tensor | None:
        """The ``triton`` / ``intmm`` kernels' result, or None where they do not apply (then
        ``intmm`` runs cuDNN's graph and ``triton`` the fp16 fallback)."""
        r, s = self.weight_int8.shape[2:]
        dilated = tuple(self.dilation) != (1, 1)
        if self.kernel == "intmm":
            shape = (self.in_channels, self.out_channels, r, s, self.stride, self.padding)
            if dilated or not int8_triton.int_mm_eligible(*shape):
                return None
            w, scale, bias = self._operands(x, "ck")
            xq = quantize_int8(x.contiguous(memory_format=CL), self.input_scale)
            return int8_triton.conv1x1_int_mm(xq, w, scale, bias, silu=self.silu, out_dtype=x.dtype)
        if dilated:
            self.fallback = "dilated convolution (the Triton int8 kernel has dilation 1)"
            return None
        w, scale, bias = self._operands(x, "packed")
        return int8_triton.conv_int8(
            x, w, scale, bias, r=r, s=s, stride=self.stride, padding=self.padding,
            input_scale=float(self.input_scale), silu=self.silu,
        )  # fmt: skip

    @property
    def out_dtype(self) -> torch.dtype:
        """The engine's dtype (the module's), what a convolution without hand-off writes."""
        return self.weight.dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` in the engine's dtype (or int8 handed over) -> output in the engine's dtype (or
        int8 at ``output_scale`` where this conv hands over)."""
        if self.kernel == "emulate" or not x.is_cuda:
            return self._emulate(x)
        if torch.compiler.is_compiling():
            return self._compiled(x)
        if self.kernel in ("triton", "intmm") and self.fallback is None:
            y = self._own_kernel(x)  # never linked for a hand-off: x is never int8 here
            if y is not None:
                self.ran = self.kernel
                return y
        if self.kernel in ("cudnn", "intmm"):
            plan = self._plan(x.shape, self.out_dtype, x.device)
            if plan is not None:
                x = x.contiguous(memory_format=CL)
                xq = x if x.dtype == torch.int8 else quantize_int8(x, self.input_scale)
                return self._handoff(plan.run_quantized(xq))
        return self._handoff(self._fp16(self._dequantized(x)))  # declined: conv in fp16

    def _dequantized(self, x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``x`` in ``dtype`` (the engine's): a handed-over int8 input times ``input_scale``."""
        if x.dtype != torch.int8:
            return x
        return (x.float() * self.input_scale.float()).to(dtype or self.out_dtype)

    def _handoff(self, y: torch.Tensor) -> torch.Tensor:
        """``y`` as the next convolution's int8 input where this one hands over and the kernel
        wrote ``y`` in another dtype (a graph without an int8 output, the fp16 fallback)."""
        if self.output_scale is None or y.dtype == torch.int8:
            return y
        return quantize_int8(y, self.output_scale)

    def _compiled(self, x: torch.Tensor) -> torch.Tensor:
        """Forward for torch.compile: quantise in torch ops (which inductor fuses into the
        kernel that makes ``x``), then :func:`int8_conv` (or the fp16 fallback)."""
        if self.kernel != "cudnn":
            raise NotAvailableError(
                f"int8 kernel {self.kernel} does not run under torch.compile (cudnn does)"
            )
        handoff = self.output_scale is not None
        if self.fallback is not None:
            y = self._fp16(self._dequantized(x))
            return quantize_values(y, self.output_scale).to(torch.int8) if handoff else y
        xq = x if x.dtype == torch.int8 else quantize_values(x, self.input_scale).to(torch.int8)
        k = list(self.weight_int8.shape[2:])
        return torch.ops.yolo_sm.int8_conv(
            xq, self.number, self.out_channels, k, list(self.stride), list(self.padding),
            list(self.dilation), self.out_dtype, "int8" if handoff else "engine",
        )  # fmt: skip

    def run_quantized(self, xq: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The cuDNN graph on a quantised input (plan built on first use; fp16 conv where
        cuDNN declines); output in ``dtype``, or int8 where this conv hands over."""
        if not xq.is_cuda:  # no cuDNN graph on a CPU: the emulation, from the same values
            return self._emulate_values(xq.float(), dtype)
        plan = self._plan(xq.shape, dtype, xq.device)
        if plan is not None:
            return self._handoff(plan.run_quantized(xq))
        return self._handoff(self._fp16(self._dequantized(xq, dtype)))

    def _emulate(self, x: torch.Tensor) -> torch.Tensor:
        """int8 values of input and weight, convolved in fp32, de-scaled, bias, SiLU."""
        if x.dtype == torch.int8:  # handed over: already the int8 values
            return self._emulate_values(x.float(), self.out_dtype)
        return self._emulate_values(quantize_values(x, self.input_scale), x.dtype)

    def _emulate_values(self, xq: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """:meth:`_emulate` from the input's int8 values (as float32), its output in ``dtype``
        (int8 values at ``output_scale`` where this convolution hands over)."""
        geometry = (self.stride, self.padding, self.dilation, self.groups)
        acc = nn.functional.conv2d(xq, self.weight_int8.float(), None, *geometry)
        y = acc * (self.input_scale.float() * self.weight_scale.float()).view(1, -1, 1, 1)
        if self.bias is not None:
            y = y + self.bias.float().view(1, -1, 1, 1)
        if self.silu:
            y = nn.functional.silu(y)
        if self.output_scale is not None:
            return quantize_values(y, self.output_scale).to(torch.int8)
        return y.to(dtype)

    def extra_repr(self) -> str:
        out = "" if self.output_scale is None else f", output_scale={self.output_scale:.3g}"
        return super().extra_repr() + out


def quantize_convs(
    model: nn.Module,
    batches,
    kernel: str = "emulate",
    calibration: str = "max",
    percentile: float = INT8_PERCENTILE,
    handoff: bool = True,
) -> dict:
    """Replace each eligible conv of ``model`` in place by a calibrated :class:`Int8Conv`; with
    ``handoff``, link int8 hand-offs (:func:`link_handoffs`). Returns the engine's int8 info."""

    def make(conv, amax, silu):
        return Int8Conv(conv, amax / INT8_MAX, kernel, silu=silu)

    stat = calibration_stat(calibration, percentile)
    n = quantize_model(model, batches, make, fuse=kernel != "emulate", stat=stat)
    linked = 0
    if handoff and kernel in HANDOFF_KERNELS and batches:
        linked = link_handoffs(model, batches[0])
    return {
        "int8_kernel": kernel,
        "int8_convs": n,
        "int8_handoffs": linked,
        "int8_calibration": calibration,
    }


#: the kernels whose convolutions hand int8 outputs over (Triton and _int_mm read fp16 inputs)
HANDOFF_KERNELS = ("cudnn", "emulate")
#: tensor functions that read a tensor's metadata, not its values: not a use of the values
_METADATA = frozenset(
    {"__get__", "size", "dim", "stride", "numel", "is_contiguous", "element_size", "__len__"}
)
#: tensor functions that commute with quantisation at one scale: int8 may flow through them
_TRANSPARENT = {
    "max_pool2d": lambda z: nn.functional.max_pool2d(z, 3, 1, 1),
    "cat": lambda z: torch.cat([z, z], 1),
}


def _transparent(device) -> frozenset[str]:
    """The :data:`_TRANSPARENT` functions ``device`` runs on int8 tensors."""
    ok = set()
    z = torch.zeros(1, 4, 5, 5, dtype=torch.int8, device=device)
    for name, f in _TRANSPARENT.items():
        try:
            if f(z).dtype == torch.int8:
                ok.add(name)
        except Exception:  # noqa: BLE001 - not for int8 here: it stays a use of the values
            pass
    return frozenset(ok)


@torch.no_grad()
def link_handoffs(model: nn.Module, x: torch.Tensor) -> int:
    """Link each :class:`Int8Conv` whose output reaches only Int8Convs of one input scale (maybe
    through max-pool/concat; traced in one forward on ``x``) to write int8 there; how many."""
    convs = [m for m in model.modules() if isinstance(m, Int8Conv)]
    p = next(model.parameters())
    passes = _transparent(p.device)
    calls: Counter = Counter()
    fed: defaultdict = defaultdict(list)  # id(tensor) -> the int8 convolutions given it
    made: dict = {}  # id(tensor) -> the int8 convolution that returned it
    reads: Counter = Counter()  # id(tensor) -> reads outside the int8 convolutions, feeds too
    derived: dict = {}  # id(tensor) -> ids of the tensors a transparent function made it of
    keep: list = []  # every tensor seen stays alive, so that no id is reused
    inside = [0]

    class Reads(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = getattr(func, "__name__", "")
            if inside[0] or name in _METADATA:
                return out
            inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            for t in inputs:
                reads[id(t)] += 1
            keep.extend(inputs)
            if name in passes and isinstance(out, torch.Tensor):
                derived[id(out)] = [id(t) for t in inputs]
                keep.append(out)
            return out

    def before(mod, args):
        calls[mod] += 1
        fed[id(args[0])].append(mod)
        reads[id(args[0])] += 1
        keep.append(args[0])
        inside[0] += 1

    def after(mod, args, out):
        inside[0] -= 1
        made[id(out)] = mod
        keep.append(out)

    kernels = {m: m.kernel for m in convs}
    handles = []
    try:
        for m in convs:
            m.output_scale, m.kernel = None, "emulate"  # the data flow, without cuDNN graphs
            handles += [m.register_forward_pre_hook(before), m.register_forward_hook(after)]
        with Reads():
            out = model(x.to(device=p.device, dtype=p.dtype))
        for t in tree_leaves(out):  # what the forward returns, its caller reads
            if isinstance(t, torch.Tensor):
                reads[id(t)] += 1
        del out
    finally:
        for h in handles:
            h.remove()
        for m, k in kernels.items():
            m.kernel = k

    def sources(key, within: Counter, done: dict) -> set | None:
        """The int8 convs whose outputs alone make tensor ``key`` (None if any other source);
        counts reads on the way in ``within``."""
        if key in made:
            return {made[key]}
        if key in done:
            return done[key]
        found: set | None = set() if key in derived else None
        for k in derived.get(key, ()):
            within[k] += 1
            more = sources(k, within, done)
            if more is None:
                found = None
                break
            found |= more
        done[key] = found
        return found

    def eligible(m) -> bool:
        channels_ok = not (m.in_channels % CHANNEL_MULTIPLE or m.out_channels % CHANNEL_MULTIPLE)
        return calls[m] == 1 and m.kernel in HANDOFF_KERNELS and channels_ok

    linked = 0
    for key, takers in fed.items():
        # several convolutions reading one tensor were calibrated on the same values: one
        # input scale, which the int8 tensor serves them all at (YOLO's head branches)
        scales = {float(t.input_scale) for t in takers}
        if len(scales) != 1 or not all(map(eligible, takers)):
            continue
        within: Counter = Counter({key: len(takers)})
        producers = sources(key, within, {})
        if not producers or not all(map(eligible, producers)):
            continue
        if any(reads[k] != n for k, n in within.items()):  # read elsewhere too
            continue
        for m in producers:
            m.output_scale = float(takers[0].input_scale)
        linked += len(producers)
    return linked


def graph_counts(model: nn.Module) -> dict[str, int]:
    """How ``model``'s int8 convs ran so far: counts of ``fused_int8`` / ``fused`` / ``unfused``
    cuDNN graphs, ``triton``, ``intmm``, ``fp16`` fallbacks and ``int8_convs``."""
    convs = [m for m in model.modules() if isinstance(m, Int8Conv)]
    out = dict.fromkeys(("fused_int8", "fused", "unfused", "triton", "intmm", "fp16"), 0)
    for m in convs:
        if m.fallback:
            out["fp16"] += 1
        elif m.ran:
            out[m.ran] += 1
        elif m.graph_modes:
            out[next(iter(m.graph_modes.values()))] += 1
    return {"int8_convs": len(convs), **out}


def choose_kernel(device: str, requested: str = "auto") -> str:
    """The kernel for ``device``: ``requested`` (vocab.INT8_KERNELS, checked by EngineConfig);
    ``auto`` is emulate on CPU, cudnn on a GPU of compute capability >= 7.5 with cuDNN."""
    if not str(device).startswith("cuda"):
        if requested not in ("auto", "emulate"):
            raise NotAvailableError(f"int8 kernel {requested} needs a CUDA device")
        return "emulate"
    if requested == "emulate":
        return "emulate"
    require_gpu(device, "precision int8", (7, 5), "int8 tensor cores")
    if requested == "triton":
        int8_triton.compiled_kernels()  # NotAvailableError without Triton
        return "triton"
    import_cudnn("precision int8")  # cudnn, and intmm's convolutions other than 1x1
    return "cudnn" if requested == "auto" else requested

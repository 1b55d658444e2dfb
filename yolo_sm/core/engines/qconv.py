"""What the fp8 and int8 convolutions share: eligible convs, calibration on real photos, the
Triton quantiser and one tuned, cached cuDNN frontend graph per conv and input shape."""

from __future__ import annotations

import functools
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from yolo_sm.contract.errors import NotAvailableError, need
from yolo_sm.core.engines import plan_cache
from yolo_sm.core.models.common import calibration_batches, hooked

_HANDLES: dict = {}  # one cuDNN handle per device
CL = torch.channels_last


def eligible_convs(model: nn.Module) -> list[tuple[nn.Module, str, nn.Conv2d]]:
    """(parent, attribute, conv) of each ultralytics ``Conv`` block's conv but 3-input-channel
    (the first) and grouped ones: what the 8-bit paths quantise."""
    out = []
    for parent in model.modules():
        conv = getattr(parent, "conv", None)
        is_block = isinstance(conv, nn.Conv2d) and hasattr(parent, "act")  # ultralytics Conv
        if is_block and conv.in_channels > 3 and conv.groups == 1:
            out.append((parent, "conv", conv))
    return out


def abs_max(x: torch.Tensor) -> float:
    """max |x|: the default calibration statistic."""
    return float(x.detach().abs().max())


@torch.no_grad()
def calibrate_inputs(model: nn.Module, convs, batches, stat=abs_max) -> list[float]:
    """Per conv of ``convs``: the largest ``stat`` of its input over forwards on ``batches``."""
    amax = [0.0] * len(convs)
    index = {id(c): i for i, (_, _, c) in enumerate(convs)}

    def hook(mod, args):
        i = index[id(mod)]
        amax[i] = max(amax[i], float(stat(args[0].detach())))

    handles = [c.register_forward_pre_hook(hook) for _, _, c in convs]
    with hooked(handles):
        p = next(model.parameters())
        for x in batches:
            model(x.to(device=p.device, dtype=p.dtype))
    return amax


def calibration_inputs(imgsz: int) -> list[torch.Tensor]:
    """The real-image calibration batch (no noise: activation ranges come from photos)."""
    return calibration_batches(imgsz)[:1]


def conv_out_hw(h: int, w: int, kernel, padding, stride, dilation=(1, 1)) -> tuple[int, int]:
    """(height, width) of a convolution's output."""
    sizes = zip((h, w), kernel, padding, stride, dilation, strict=True)
    return tuple((n + 2 * p - d * (k - 1) - 1) // st + 1 for n, k, p, st, d in sizes)


class QuantConv(nn.Module):
    """A Conv2d whose input (per-tensor ``input_scale``) and weight (per-channel ``weight_scale``)
    are 8-bit (``weight_q``); output, bias and what follows in the input's dtype."""

    WEIGHT = "weight_q"  # the quantised weight's buffer name

    def __init__(self, conv, input_scale, kernel, silu, wq, ws):
        super().__init__()
        self.kernel, self.silu = kernel, silu  # silu: the block's SiLU runs here (fused)
        self.fallback: str | None = None  # why cuDNN declined this conv, if it did
        self._plans: dict = {}
        self.stride, self.padding = conv.stride, conv.padding
        self.dilation, self.groups = conv.dilation, conv.groups
        self.in_channels, self.out_channels = conv.in_channels, conv.out_channels
        self.register_buffer(self.WEIGHT, wq)
        self.register_buffer("weight_scale", ws)
        self.register_buffer("input_scale", torch.tensor(float(input_scale)))
        dequant = (wq.float() * ws[:, None, None, None]).to(conv.weight.dtype)
        self.register_buffer("weight", dequant, persistent=False)
        self.bias = None if conv.bias is None else nn.Parameter(conv.bias.detach().clone())

    @property
    def weight_q(self) -> torch.Tensor:
        return getattr(self, self.WEIGHT)

    def _plan(self, shape, dtype: torch.dtype, device):
        """The cuDNN graph (``_build``) for an input of ``shape`` and ``dtype``, built on first
        use; None where cuDNN declined this convolution (``fallback`` says why)."""
        key = (tuple(shape), dtype, device)
        plan = self._plans.get(key)
        if plan is None and self.fallback is None:
            like = torch.empty(tuple(shape), dtype=dtype, device=device)
            plan = self._build(like.contiguous(memory_format=CL))
            if plan is not None:
                self._plans[key] = plan
        return plan

    def _fp16(self, x: torch.Tensor) -> torch.Tensor:
        """The convolution in ``x``'s dtype with the 8-bit-rounded weight."""
        bias = None if self.bias is None else self.bias.to(x.dtype)
        w = self.weight.to(x.dtype)
        y = nn.functional.conv2d(x, w, bias, self.stride, self.padding, self.dilation, self.groups)
        return nn.functional.silu(y) if self.silu else y

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, stride={self.stride}, "
            f"input_scale={float(self.input_scale):.3g}, kernel={self.kernel}, silu={self.silu}"
        )


def quantize_model(model: nn.Module, batches, make, fuse: bool, stat=abs_max) -> int:
    """Replace each eligible conv of ``model`` in place by ``make(conv, amax, silu)``, calibrated
    on ``batches`` by ``stat``; with ``fuse`` the block's SiLU moves into it. Returns how many."""
    convs = eligible_convs(model)
    amax = calibrate_inputs(model, convs, batches, stat)
    for (parent, attr, conv), a in zip(convs, amax, strict=True):
        silu = fuse and isinstance(parent.act, nn.SiLU)
        setattr(parent, attr, make(conv, max(a, 1e-12), silu))
        if silu:
            parent.act = nn.Identity()
    return len(convs)


@functools.cache
def _triton_quantize():
    """The Triton quantiser (elementwise over a tensor's storage), or None without Triton."""
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001 - no Triton: torch ops do the same, slower
        return None

    @triton.jit
    def _quantize(x_ptr, y_ptr, n, inv_scale, LIMIT: tl.constexpr, ROUND: tl.constexpr,
                  BLOCK: tl.constexpr):  # fmt: skip
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) * inv_scale
        v = tl.minimum(tl.maximum(v, -LIMIT), LIMIT)
        if ROUND:  # float -> int truncates: halves away from zero
            v = tl.where(v >= 0, v + 0.5, v - 0.5).to(tl.int32)
        tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask=mask)

    return _quantize


def quantize_launch(x: torch.Tensor, dtype, inv_scale: float, limit: float, rounding: bool):
    """``x * inv_scale`` saturated at +-``limit`` (``rounding``: halves away from zero) as ``dtype``
    in ``x``'s memory format, by the Triton quantiser; None off a GPU or without Triton."""
    kernel = _triton_quantize() if x.is_cuda else None
    if kernel is None:
        return None
    if not (x.is_contiguous() or x.is_contiguous(memory_format=CL)):
        x = x.contiguous(memory_format=CL)
    out = torch.empty_like(x, dtype=dtype)
    n = x.numel()
    kernel[((n + 4095) // 4096,)](x, out, n, inv_scale, LIMIT=limit, ROUND=rounding, BLOCK=4096)
    return out


def fallbacks(model: nn.Module) -> dict[str, str]:
    """Module name -> why cuDNN declined it, for the 8-bit convolutions that run in fp16."""
    return {n: m.fallback for n, m in model.named_modules() if getattr(m, "fallback", None)}


def plan_sources(model: nn.Module) -> dict[str, int]:
    """How many of ``model``'s cuDNN 8-bit graphs took their plan from where (tuned, process,
    disk, cudnn); empty before any ran."""
    plans = (p for m in model.modules() for p in getattr(m, "_plans", {}).values())
    return dict(Counter(p.plan_source for p in plans if isinstance(p, CudnnQuantConv)))


def import_cudnn(what: str):
    """The cuDNN frontend module, or NotAvailableError naming ``what`` needs it."""
    advice = f"{what} on a GPU needs NVIDIA's cuDNN frontend: pip install nvidia-cudnn-frontend"
    return need("cudnn", advice)


def require_gpu(device: str, what: str, capability: tuple[int, int], cores: str) -> None:
    """NotAvailableError unless torch sees ``device`` with ``cores`` (``capability``+)."""
    if not torch.cuda.is_available():
        raise NotAvailableError(f"{what} on {device}: no CUDA device here")
    if torch.cuda.get_device_capability(torch.device(device)) < capability:
        cc = ".".join(map(str, capability))
        raise NotAvailableError(f"{what} needs {cores} (compute capability {cc}+)")


def conv_graph(cudnn, device, io, x, w, operand, conv, compute):
    """A cuDNN graph (``io`` type) with conv_fprop of image ``x`` by weight ``w`` in ``operand``
    type: (graph, handle, tensor maker, X, W, conv output)."""
    dt = cudnn.data_type
    if device not in _HANDLES:
        _HANDLES[device] = cudnn.create_handle()
    handle = _HANDLES[device]
    g = cudnn.pygraph(
        io_data_type=io,
        intermediate_data_type=dt.FLOAT,
        compute_data_type=dt.FLOAT,
        handle=handle,
    )

    def tensor(name, t, dtype):
        return g.tensor(name=name, dim=list(t.shape), stride=list(t.stride()), data_type=dtype)

    X, W = tensor("X", x, operand), tensor("W", w, operand)
    y = g.conv_fprop(
        image=X,
        weight=W,
        padding=list(conv.padding),
        stride=list(conv.stride),
        dilation=list(conv.dilation),
        compute_data_type=compute,
    )
    return g, handle, tensor, X, W, y


def finish_graph(g, modes) -> None:
    """Validate ``g`` and create its execution plans from the heuristics ``modes``."""
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans(modes)
    g.check_support()


def time_plans(cudnn, g, handle, feeds, device, limit, reps, warmup, seconds=math.inf):
    """(best (ms, index, name, workspace) or None, [(name, ms)]) of ``g``'s first ``limit`` plans
    on ``feeds``, ``reps`` calls after ``warmup`` each; stops after ``seconds`` once one ran."""
    stream = torch.cuda.current_stream(device)
    cudnn.set_stream(handle, stream.cuda_stream)
    best, timed, t0 = None, [], time.perf_counter()
    for i in range(min(g.get_execution_plan_count(), limit)):
        if best is not None and time.perf_counter() - t0 > seconds:
            break
        try:
            g.build_plan_at_index(i)
            size = max(g.get_workspace_size_plan_at_index(i), 1)
            ws = torch.empty(size, dtype=torch.uint8, device=device)
            for _ in range(warmup):  # lazy loading, JIT
                g.execute_plan_at_index(feeds, ws, i, handle=handle)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(stream)
            for _ in range(reps):
                g.execute_plan_at_index(feeds, ws, i, handle=handle)
            b.record(stream)
            b.synchronize()
        except Exception:  # noqa: BLE001 - a plan that declines is skipped
            continue
        timed.append((g.get_plan_name_at_index(i), a.elapsed_time(b) / reps))
        if best is None or timed[-1][1] < best[0]:
            best = (timed[-1][1], i, timed[-1][0], ws)
    return best, timed


@dataclass
class GraphFormat:
    """How one 8-bit format builds its cuDNN graph: data types (image, weight, compute, output),
    fused epilogue or not, quantiser, tuning limits and the tuned-plan dict."""

    operand: str  # "FP8_E4M3" / "INT8"
    compute: str  # "FLOAT" / "INT32"
    quantize: Callable[[torch.Tensor, float], torch.Tensor]
    plans: Callable[[], int]  # how many ranked plans to time (read when a graph is built)
    tuned: dict
    output: str | None = None  # "HALF" / "FLOAT" / "INT8"; None: the engine's dtype
    fused: bool = True
    random_scale: float = 1 / 64  # scale the tuning's random input is quantised with


TORCH_DTYPES = {"HALF": torch.float16, "FLOAT": torch.float32, "INT8": torch.int8}


class CudnnQuantConv:
    """One cuDNN graph: quantised image x weight (NHWC), ``y * input_scale * weight_scale[k] +
    bias`` (+ SiLU) in the input's dtype, or int8 divided by ``mod.output_scale`` (hand-off)."""

    def __init__(self, mod: nn.Module, x: torch.Tensor, fmt: GraphFormat, what: str):
        cudnn = import_cudnn(what)
        dt = cudnn.data_type
        io = {torch.float16: dt.HALF, torch.bfloat16: dt.BFLOAT16}[x.dtype]
        dev = x.device
        n, _, h, w = x.shape
        k, _, r, s = mod.weight_q.shape
        self.cudnn, self.fmt = cudnn, fmt
        self.wq = mod.weight_q.to(dev).contiguous(memory_format=CL)
        self.scale = (mod.input_scale.float() * mod.weight_scale.float()).to(dev)
        self.scale = self.scale.reshape(1, k, 1, 1).contiguous(memory_format=CL)
        bias = None if mod.bias is None else mod.bias.detach().float().to(dev).reshape(1, k, 1, 1)
        self.bias = None if bias is None else bias.contiguous(memory_format=CL)
        self.input_scale = float(mod.input_scale)
        self.silu = bool(mod.silu)
        # an INT8 output is the next convolution's input, quantised at its scale in the epilogue
        self.output_scale = getattr(mod, "output_scale", None) if fmt.output == "INT8" else None
        out_dt = getattr(dt, fmt.output) if fmt.output else io
        xs = torch.empty((n, x.shape[1], h, w), dtype=torch.int8, device="meta")
        g, self.handle, tensor, self.X, self.W, y = conv_graph(
            cudnn, dev, out_dt, xs.contiguous(memory_format=CL), self.wq,
            getattr(dt, fmt.operand), mod, getattr(dt, fmt.compute),
        )  # fmt: skip
        self.S = self.B = self.Q = self.inv_out = None
        if fmt.fused:
            self.S = tensor("S", self.scale, dt.FLOAT)
            y = g.scale(input=y, scale=self.S)
            if self.bias is not None:
                self.B = tensor("B", self.bias, dt.FLOAT)
                y = g.bias(input=y, bias=self.B)
            if mod.silu:
                y = g.swish(input=y)
            if self.output_scale:
                # y / output_scale, written as int8: cuDNN's conversion rounds and saturates
                inv = torch.full((1, 1, 1, 1), 1.0 / self.output_scale, device=dev)
                self.inv_out = inv.contiguous(memory_format=CL)
                self.Q = tensor("Q", self.inv_out, dt.FLOAT)
                y = g.scale(input=y, scale=self.Q)
            y.set_output(True).set_data_type(out_dt)
        else:  # the raw accumulator, de-scaled by torch after the graph
            y.set_output(True).set_data_type(dt.FLOAT)
        self.Y = y
        finish_graph(g, [cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
        self.graph = g
        hw = conv_out_hw(h, w, (r, s), mod.padding, mod.stride, mod.dilation)
        self.out_shape, self.dtype = (n, k, *hw), x.dtype
        self.graph_dtype = TORCH_DTYPES.get(fmt.output, x.dtype) if fmt.fused else torch.float32
        self.tuning: list[tuple[str, float]] = []  # (plan name, ms) of each plan timed
        self.plan_index = None  # the tuned plan execute runs; None: cuDNN's first buildable one
        key = (fmt.operand, fmt.output, fmt.fused, tuple(x.shape), x.dtype, k, r, s)
        key += (mod.padding, mod.stride, mod.dilation, self.bias is not None, self.silu, dev)
        key += (self.Q is not None,)
        capturing = torch.cuda.is_current_stream_capturing()
        plans = fmt.plans()
        # where the plan came from: tuned here, this process's earlier tuning, the disk cache
        # of earlier processes (plan_cache), or cuDNN's own walk
        self.plan_source = "cudnn"
        disk = plan_cache.for_device(dev) if plans > 0 and not capturing else None
        if key in fmt.tuned:
            self.plan_index, self.plan_source = fmt.tuned[key], "process"
            g.build_plan_at_index(self.plan_index)
        elif disk is not None and self._from_disk(disk, key):
            fmt.tuned[key] = self.plan_index
        elif plans > 0 and not capturing:
            self._autotune(x, plans)
            if self.plan_index is not None:
                fmt.tuned[key], self.plan_source = self.plan_index, "tuned"
                if disk is not None:
                    disk.put(key, self.plan_index, *self.best)
        else:
            g.build_plans()
        if self.plan_index is None:
            self.workspace = g.get_workspace_size()
        else:
            self.workspace = g.get_workspace_size_plan_at_index(self.plan_index)

    def _from_disk(self, disk, key: tuple) -> bool:
        """Build the plan ``disk`` holds for ``key`` if cuDNN's ranked plan at that index is
        still the one tuned (same name); False leaves the graph to be tuned."""
        entry = disk.get(key)
        if entry is None:
            return False
        index, name = entry
        try:
            if index >= self.graph.get_execution_plan_count():
                return False
            self.graph.build_plan_at_index(index)
            if self.graph.get_plan_name_at_index(index) != name:
                return False
        except Exception:  # noqa: BLE001 - a plan that no longer builds is tuned again
            return False
        self.plan_index, self.plan_source = index, "disk"
        return True

    def _feeds(self, xq: torch.Tensor, y: torch.Tensor) -> dict:
        pairs = ((self.X, xq), (self.W, self.wq), (self.Y, y), (self.S, self.scale))
        pairs += ((self.B, self.bias), (self.Q, self.inv_out))
        return {node: t for node, t in pairs if node is not None}

    def _autotune(self, x: torch.Tensor, limit: int) -> None:
        """Keep the fastest of up to ``limit`` ranked plans on random quantised input (timings in
        ``self.tuning``); if none runs, cuDNN's own walk decides."""
        xq = self.fmt.quantize(torch.randn_like(x, memory_format=CL), self.fmt.random_scale)
        y = torch.empty(self.out_shape, dtype=self.graph_dtype, device=x.device, memory_format=CL)
        feeds = self._feeds(xq, y)
        best, self.tuning = time_plans(
            self.cudnn, self.graph, self.handle, feeds, x.device, limit, 5, 2, 1.0
        )
        if best is None:
            self.graph.build_plans()
        else:
            self.plan_index, self.best = best[1], (best[2], best[0])  # (plan name, ms)

    def execute(self, xq: torch.Tensor) -> torch.Tensor:
        """The graph alone on a quantised NHWC image ``xq``: its output in ``graph_dtype``."""
        y = torch.empty(self.out_shape, dtype=self.graph_dtype, device=xq.device, memory_format=CL)
        ws = torch.empty(max(self.workspace, 1), dtype=torch.uint8, device=xq.device)
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream(xq.device).cuda_stream)
        feeds = self._feeds(xq, y)
        if self.plan_index is None:
            self.graph.execute(feeds, ws, handle=self.handle)
        else:
            self.graph.execute_plan_at_index(feeds, ws, self.plan_index, handle=self.handle)
        return y

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=CL)  # the graph's image layout
        return self.run_quantized(self.fmt.quantize(x, self.input_scale))

    def run_quantized(self, xq: torch.Tensor) -> torch.Tensor:
        """The graph on an input quantised at ``input_scale``, then the unfused epilogue: output
        in the engine's dtype (int8 as written: the next conv's input)."""
        y = self.execute(xq.contiguous(memory_format=CL))
        if not self.fmt.fused:  # de-scale, bias and SiLU after the graph, in float
            y = y.mul_(self.scale)
            if self.bias is not None:
                y = y.add_(self.bias)
            if self.silu:
                y = nn.functional.silu(y, inplace=True)
        return y if y.dtype in (self.dtype, torch.int8) else y.to(self.dtype)

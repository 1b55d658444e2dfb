"""What the fp8 and int8 convolution paths share: eligible convs, calibration on real images,
and one tuned, cached cuDNN frontend graph per conv and input shape (:class:`CudnnQuantConv`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from yolo_sm.contract.errors import NotAvailableError
from yolo_sm.core.engines import plan_cache
from yolo_sm.core.models.common import calibration_batches

_HANDLES: dict = {}


def eligible_convs(model: nn.Module) -> list[tuple[nn.Module, str, nn.Conv2d]]:
    """(parent, attribute, conv) of each conv the 8-bit paths quantise: every ultralytics
    ``Conv`` block's, but 3-input-channel (the first) and grouped ones."""
    out = []
    for parent in model.modules():
        conv = getattr(parent, "conv", None)
        is_block = isinstance(conv, nn.Conv2d) and hasattr(parent, "act")  # ultralytics Conv
        if is_block and conv.in_channels > 3 and conv.groups == 1:
            out.append((parent, "conv", conv))
    return out


def abs_max(x: torch.Tensor) -> float:
    """max |x|: the max calibration statistic."""
    return float(x.detach().abs().max())


@torch.no_grad()
def calibrate_inputs(
    model: nn.Module, convs, batches, stat: Callable[[torch.Tensor], float] = abs_max
) -> list[float]:
    """Per conv (same order as ``convs``): the largest ``stat`` of its input over forwards of
    ``model`` on ``batches`` (``stat`` = max |x| by default)."""
    amax = [0.0] * len(convs)
    index = {id(c): i for i, (_, _, c) in enumerate(convs)}

    def hook(mod, args):
        i = index[id(mod)]
        amax[i] = max(amax[i], float(stat(args[0].detach())))

    handles = [c.register_forward_pre_hook(hook) for _, _, c in convs]
    try:
        for x in batches:
            p = next(model.parameters())
            model(x.to(device=p.device, dtype=p.dtype))
    finally:
        for h in handles:
            h.remove()
    return amax


def calibration_inputs(imgsz: int) -> list[torch.Tensor]:
    """The real-image calibration batch (no noise: activation ranges come from photos)."""

    return calibration_batches(imgsz)[:1]


class QuantConv(nn.Module):
    """A Conv2d whose input (per-tensor ``input_scale``) and weight (per-channel ``weight_scale``)
    are 8-bit (``weight_q``); output, bias and what follows in the input's dtype."""

    KERNELS: tuple = ()
    WEIGHT = "weight_q"  # the quantised weight's buffer name

    def __init__(self, conv, input_scale, kernel, silu, wq, ws):
        super().__init__()
        if kernel not in self.KERNELS:
            raise ValueError(f"unknown 8-bit kernel {kernel!r}: choose one of {self.KERNELS}")
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
        """The quantised weight the cuDNN graph reads."""
        return getattr(self, self.WEIGHT)

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


def quantize_launch(kernel, x: torch.Tensor, dtype: torch.dtype, inv_scale: float):
    """Run a Triton quantisation ``kernel`` elementwise over ``x``'s storage into ``dtype``,
    keeping its memory format."""
    if not (x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last)):
        x = x.contiguous(memory_format=torch.channels_last)
    out = torch.empty_like(x, dtype=dtype)
    n = x.numel()
    kernel[((n + 4095) // 4096,)](x, out, n, inv_scale, BLOCK=4096)
    return out


def fallbacks(model: nn.Module) -> dict[str, str]:
    """Module name -> why cuDNN declined it, for the 8-bit convolutions that run in fp16."""
    return {n: m.fallback for n, m in model.named_modules() if getattr(m, "fallback", None)}


def plan_sources(model: nn.Module) -> dict[str, int]:
    """How many of ``model``'s cuDNN 8-bit graphs took their plan from where
    (:attr:`CudnnQuantConv.plan_source`: tuned, process, disk, cudnn); empty before any ran."""
    out: dict[str, int] = {}
    for m in model.modules():
        for plan in getattr(m, "_plans", {}).values():
            if isinstance(plan, CudnnQuantConv):
                out[plan.plan_source] = out.get(plan.plan_source, 0) + 1
    return out


def import_cudnn(what: str):
    """The cuDNN frontend module, or NotAvailableError naming ``what`` needs it."""
    try:
        import cudnn
    except ImportError as e:
        raise NotAvailableError(
            f"{what} on a GPU needs NVIDIA's cuDNN frontend: pip install nvidia-cudnn-frontend"
        ) from e
    return cudnn


@dataclass
class GraphFormat:
    """How one 8-bit format builds its cuDNN graph: data types (image, weight, compute, output),
    fused epilogue or not, quantiser, tuning limits and the tuned-plan dict."""

    operand: str  # "FP8_E4M3" / "INT8"
    compute: str  # "FLOAT" / "INT32"
    quantize: Callable[[torch.Tensor, float], torch.Tensor]
    plans: Callable[[], int]  # how many ranked plans to time (read when a graph is built)
    seconds: float
    tuned: dict
    output: str | None = None  # "HALF" / "FLOAT"; None: the engine's dtype (HALF / BFLOAT16)
    fused: bool = True
    random_scale: float = 1 / 64  # scale the tuning's random input is quantised with


class CudnnQuantConv:
    """One cuDNN graph: quantised image x weight (NHWC), ``y * input_scale * weight_scale[k] +
    bias`` (+ SiLU) in the input's dtype, or int8 divided by ``mod.output_scale`` (hand-off)."""

    def __init__(self, mod: nn.Module, x: torch.Tensor, fmt: GraphFormat, what: str):
        cudnn = import_cudnn(what)
        dt = cudnn.data_type
        io = {torch.float16: dt.HALF, torch.bfloat16: dt.BFLOAT16}[x.dtype]
        dev = x.device
        if dev not in _HANDLES:
            _HANDLES[dev] = cudnn.create_handle()
        self.cudnn, self.handle, self.fmt = cudnn, _HANDLES[dev], fmt
        n, _, h, w = x.shape
        k, _, r, s = mod.weight_q.shape
        cl = torch.channels_last
        self.wq = mod.weight_q.to(dev).contiguous(memory_format=cl)
        self.scale = (
            (mod.input_scale.float() * mod.weight_scale.float()).to(dev).reshape(1, k, 1, 1)
        ).contiguous(memory_format=cl)
        self.bias = None
        if mod.bias is not None:
            self.bias = mod.bias.detach().float().to(dev).reshape(1, k, 1, 1)
            self.bias = self.bias.contiguous(memory_format=cl)
        self.input_scale = float(mod.input_scale)
        self.silu = bool(mod.silu)
        # an INT8 output is the next convolution's input, quantised at its scale in the epilogue
        self.output_scale = getattr(mod, "output_scale", None) if fmt.output == "INT8" else None
        if fmt.output == "INT8" and not (fmt.fused and self.output_scale):
            raise ValueError("an INT8 graph output needs the fused epilogue and an output scale")
        out_dt = getattr(dt, fmt.output) if fmt.output else io
        g = cudnn.pygraph(
            io_data_type=out_dt,
            intermediate_data_type=dt.FLOAT,
            compute_data_type=dt.FLOAT,
            handle=self.handle,
        )
        xs = torch.empty((n, x.shape[1], h, w), dtype=torch.int8, device="meta")
        xs = xs.contiguous(memory_format=cl)

        def tensor(name, t, dtype):
            return g.tensor(name=name, dim=list(t.shape), stride=list(t.stride()), data_type=dtype)

        operand = getattr(dt, fmt.operand)
        self.X = tensor("X", xs, operand)
        self.W = tensor("W", self.wq, operand)
        y = g.conv_fprop(
            image=self.X,
            weight=self.W,
            padding=list(mod.padding),
            stride=list(mod.stride),
            dilation=list(mod.dilation),
            compute_data_type=getattr(dt, fmt.compute),
        )
        self.S = self.B = self.Q = None
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
                self.inv_out = inv.contiguous(memory_format=cl)
                self.Q = tensor("Q", self.inv_out, dt.FLOAT)
                y = g.scale(input=y, scale=self.Q)
            y.set_output(True).set_data_type(out_dt)
        else:  # the raw accumulator, de-scaled by torch after the graph
            y.set_output(True).set_data_type(dt.FLOAT)
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
        torch_out = {
            "HALF": torch.float16,
            "FLOAT": torch.float32,
            "BFLOAT16": torch.bfloat16,
            "INT8": torch.int8,
        }
        self.graph_dtype = torch_out[fmt.output] if fmt.output and fmt.fused else x.dtype
        if not fmt.fused:
            self.graph_dtype = torch.float32
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
        feeds = {self.X: xq, self.W: self.wq, self.Y: y}
        if self.S is not None:
            feeds[self.S] = self.scale
        if self.B is not None:
            feeds[self.B] = self.bias
        if self.Q is not None:
            feeds[self.Q] = self.inv_out
        return feeds

    def _autotune(self, x: torch.Tensor, limit: int, reps: int = 5) -> None:
        """Time up to ``limit`` ranked plans on random quantised input and keep the fastest
        (timings in ``self.tuning``); if none runs, cuDNN's own walk decides."""
        g, dev = self.graph, x.device
        xr = torch.randn_like(x, memory_format=torch.channels_last)
        xq = self.fmt.quantize(xr, self.fmt.random_scale)
        y = torch.empty(
            self.out_shape, dtype=self.graph_dtype, device=dev, memory_format=torch.channels_last
        )
        feeds = self._feeds(xq, y)
        stream = torch.cuda.current_stream(dev)
        self.cudnn.set_stream(self.handle, stream.cuda_stream)
        best, t0 = None, time.perf_counter()
        for i in range(min(g.get_execution_plan_count(), limit)):
            if best is not None and time.perf_counter() - t0 > self.fmt.seconds:
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
                best = (ms, i, self.tuning[-1][0])
        if best is None:
            g.build_plans()
        else:
            self.plan_index = best[1]
            self.best = (best[2], best[0])  # (plan name, ms) of the kept plan

    def execute(self, xq: torch.Tensor) -> torch.Tensor:
        """The graph alone on an already quantised NHWC image ``xq``: its output tensor in
        ``graph_dtype`` (the raw accumulator where the epilogue is not fused)."""
        y = torch.empty(
            self.out_shape,
            dtype=self.graph_dtype,
            device=xq.device,
            memory_format=torch.channels_last,
        )
        ws = torch.empty(max(self.workspace, 1), dtype=torch.uint8, device=xq.device)
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream(xq.device).cuda_stream)
        if self.plan_index is None:
            self.graph.execute(self._feeds(xq, y), ws, handle=self.handle)
        else:
            self.graph.execute_plan_at_index(
                self._feeds(xq, y), ws, self.plan_index, handle=self.handle
            )
        return y

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=torch.channels_last)  # the graph's image layout
        return self.run_quantized(self.fmt.quantize(x, self.input_scale))

    def run_quantized(self, xq: torch.Tensor, cast: bool = True) -> torch.Tensor:
        """The graph on an input quantised at ``input_scale``, then the unfused epilogue: output
        in the engine's dtype (int8 as written; FLOAT where not ``cast``)."""
        y = self.execute(xq.contiguous(memory_format=torch.channels_last))
        if not self.fmt.fused:  # de-scale, bias and SiLU after the graph, in float
            y = y.mul_(self.scale)
            if self.bias is not None:
                y = y.add_(self.bias)
            if self.silu:
                y = nn.functional.silu(y, inplace=True)
        if y.dtype == self.dtype or y.dtype == torch.int8 or not cast:  # int8: next conv's
            return y
        return y.to(self.dtype)

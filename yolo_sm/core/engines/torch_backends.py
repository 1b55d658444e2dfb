"""PyTorch engines: eager, one CUDA graph of the eager model, and torch.compile."""

from __future__ import annotations

import copy
import time
import weakref

import torch

from yolo_sm.contract.errors import NotAvailableError
from yolo_sm.contract.values import split_compile_mode
from yolo_sm.core.engines import compile_cache, fp8, int8
from yolo_sm.core.engines.base import DTYPES, Engine, head_tensor, make_input, numerics
from yolo_sm.core.engines.config import EngineConfig, Layout, Precision
from yolo_sm.core.engines.qconv import calibration_inputs
from yolo_sm.core.models.common import frozen
from yolo_sm.core.models.rewrites import apply_rewrites


def prepare_module(model: torch.nn.Module, config: EngineConfig) -> torch.nn.Module:
    """A copy of ``model`` in eval mode with the engine's dtype, device and memory format."""
    m = frozen(copy.deepcopy(model)).to(device=config.device, dtype=DTYPES[config.precision])
    if config.layout is Layout.NHWC:
        m = m.to(memory_format=torch.channels_last)
    if config.precision is Precision.FP8:
        kernel = fp8.choose_kernel(config.device)
        m.fp8_info = fp8.quantize_convs(m, calibration_inputs(config.imgsz), kernel)
    if config.precision is Precision.INT8:
        kernel = int8.choose_kernel(config.device, config.int8_kernel)
        how = (config.int8_calibration, config.int8_percentile)
        batches = calibration_inputs(config.imgsz)
        m.int8_info = int8.quantize_convs(m, batches, kernel, *how, handoff=config.int8_handoff)
    if config.layout is Layout.NHWC and config.precision in (Precision.FP8, Precision.INT8):
        m = m.to(memory_format=torch.channels_last)  # the 8-bit modules' buffers too
    return m


def build_eager(model: torch.nn.Module, config: EngineConfig) -> Engine:
    m = prepare_module(model, config)

    def run(x: torch.Tensor) -> torch.Tensor:
        with numerics(config), torch.inference_mode():
            return head_tensor(m(x))

    desc = f"eager {config.precision.value} {config.layout.value}"
    return Engine(config, run, desc, module=m, capture=_capturable(m, config))


def _capturable(m: torch.nn.Module, config: EngineConfig):
    """``m``'s forward for a caller's CUDA graph capture (:attr:`Engine.capture`), under
    ``no_grad`` (not ``inference_mode``, as :func:`build_compiled`)."""

    def forward(x: torch.Tensor) -> torch.Tensor:
        with numerics(config), torch.no_grad():
            return head_tensor(m(x))

    return forward


def build_cudagraph(model: torch.nn.Module, config: EngineConfig, wrap=None) -> Engine:
    """One forward (of ``wrap(module)`` where given) in a CUDA graph; a call copies the input in
    and replays. The output is the graph's static tensor, overwritten by the next call."""
    name = config.backend.value
    if not str(config.device).startswith("cuda"):
        raise NotAvailableError(f"backend {name} needs a CUDA device; use backend eager on CPU")
    m = prepare_module(model, config)
    m = wrap(m) if wrap is not None else m
    static_in = make_input(config, seed=0)
    t0 = time.perf_counter()
    with numerics(config), torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on a side stream (cuDNN autotuning, allocations)
            for _ in range(3):
                head_tensor(m(static_in))
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        # cached free blocks could be released by a retry inside the capture: release them first
        torch.cuda.empty_cache()
        reserved0 = torch.cuda.memory_reserved(static_in.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = head_tensor(m(static_in))
    torch.cuda.synchronize()
    capture_s = time.perf_counter() - t0
    # the graph's private pool (its activations), which max_memory_allocated does not see
    pool = torch.cuda.memory_reserved(static_in.device) - reserved0
    graph_pool_bytes = max(0, pool - static_out.untyped_storage().nbytes())

    def run(x: torch.Tensor) -> torch.Tensor:
        if x is not static_in:
            static_in.copy_(x)
        graph.replay()
        return static_out

    info = {"capture_s": capture_s, "graph_pool_bytes": graph_pool_bytes}
    if wrap is not None:  # the copy-free engine: its convolutions and concatenation copies
        info.update(convs_strided=m.counts["strided"], convs_copied=m.counts["copied"])
        info["concat_copies"] = m.concat_copies
    eng = Engine(
        config,
        run,
        f"{name} {config.precision.value} {config.layout.value}",
        info=info,
        close_fn=graph.reset,
        keepalive=(m, static_out),
        module=m,
        # the forward its graph replays, for a caller's own graph (a graph is not replayed
        # inside another's capture)
        capture=_capturable(m, config),
    )
    eng._input = static_in
    return eng


#: torch.compile modes that run their graphs as CUDA graphs of their own (cudagraph trees)
GRAPHED_COMPILE_MODES = ("reduce-overhead", "max-autotune")

_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _compiled_module(model: torch.nn.Module, config: EngineConfig):
    """One compiled module per (model, precision, layout, mode, device, int8 settings), shared by
    every batch size (a new batch re-traces with a dynamic batch dimension)."""
    per_model = _COMPILED.setdefault(model, {})
    key = (config.precision, config.layout, config.compile_mode, str(config.device))
    if config.precision is Precision.INT8:  # how it quantises makes another module
        key += (config.int8_kernel, config.int8_calibration, config.int8_percentile)
        key += (config.int8_handoff,)
    if key not in per_model:
        import torch._dynamo.config as dcfg

        # each model width is a new set of guards on the same forward(): lift dynamo's default
        # limit of 8 so a sweep never silently falls back to eager
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dcfg, name):
                setattr(dcfg, name, max(getattr(dcfg, name), 512))
        torch_mode, rewrites = split_compile_mode(config.compile_mode)
        m = prepare_module(model, config)
        # exact rewrites named after the mode (models.rewrites); what each changed rides along
        m.rewrites = apply_rewrites(m, rewrites)
        per_model[key] = torch.compile(m, mode=torch_mode, fullgraph=False)
    compiled = per_model[key]
    if config.precision is Precision.INT8 and str(config.device).startswith("cuda"):
        # one eager forward per batch, so cuDNN graphs are built outside reduce-overhead's pool
        done = compiled._orig_mod.__dict__.setdefault("_int8_batches", set())
        if config.batch not in done:
            with numerics(config), torch.no_grad():
                compiled._orig_mod(make_input(config, seed=0))
            done.add(config.batch)
    return compiled


def build_compiled(model: torch.nn.Module, config: EngineConfig) -> Engine:
    """torch.compile with ``config.compile_mode``, compiled at build time under no_grad (not
    inference_mode: it forces recompiles); ``info``: ``recompiles``, ``compile_cache``."""
    cache = compile_cache.setup(config.cache_dir)  # before the first compile of the process
    compiled = _compiled_module(model, config)
    x0 = make_input(config, seed=0)
    frames_before = _compiled_frames()
    t0 = time.perf_counter()
    calls = []  # seconds of each compiling call, to the end of its GPU work
    with (
        compile_cache.Probe(cache["dir"], config.compile_mode) as probe,
        numerics(config),
        torch.no_grad(),
    ):
        for _ in range(3):
            t = time.perf_counter()
            head_tensor(compiled(x0))
            if str(config.device).startswith("cuda"):
                torch.cuda.synchronize()
            calls.append(time.perf_counter() - t)
    compile_s = time.perf_counter() - t0
    frames_after_build = _compiled_frames()
    info = {
        "compile_s": compile_s,
        # the first call traces and compiles; reduce-overhead records its CUDA graphs in later ones
        "compile_first_s": calls[0],
        "compile_mode": config.compile_mode,
        "graphs_compiled": frames_after_build - frames_before,
        # per rewrite of the mode (``default+sep-pool``), the modules it changed
        "rewrites": dict(getattr(compiled._orig_mod, "rewrites", {})),
        "recompiles": 0,
        **probe.info(),
    }

    def run(x: torch.Tensor) -> torch.Tensor:
        with numerics(config), torch.no_grad():
            out = head_tensor(compiled(x))
        info["recompiles"] = _compiled_frames() - frames_after_build
        return out

    graphed = split_compile_mode(config.compile_mode)[0] in GRAPHED_COMPILE_MODES

    return Engine(
        config,
        run,
        f"compile[{config.compile_mode}] {config.precision.value} {config.layout.value}",
        info=info,
        module=getattr(compiled, "_orig_mod", None),
        capture=None if graphed else run,  # a mode with CUDA graphs of its own: not capturable
    )


def _compiled_frames() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"].get("unique_graphs", 0))

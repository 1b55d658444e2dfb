"""What the three techniques of :mod:`yolo_sm.topics.techniques.collect` share: the 16-bit type of a
device, an eager forward (optionally under ``torch.autocast``) and one CUDA graph of any
forward, a checked and timed forward point, and the kernel mix of a Kineto pass."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.vocab import TOLERANCE
from yolo_sm.core.engines.base import head_tensor, make_input, numerics, photo_input, relative_l2
from yolo_sm.core.engines.config import EngineConfig, Precision
from yolo_sm.core.engines.torch_backends import prepare_module
from yolo_sm.core.grid import free_memory
from yolo_sm.core.profiling import kineto
from yolo_sm.core.sweep import failure
from yolo_sm.core.timing import measure
from yolo_sm.topics.techniques.analyse import kernel_mix_of

BACKENDS = ("eager", "cudagraph")
TORCH_DTYPES = {Precision.FP16: torch.float16, Precision.BF16: torch.bfloat16}


def low_precision(device: str) -> Precision:
    """The 16-bit type of the techniques on ``device``: fp16 on a GPU, bf16 on a CPU (the type
    CPU autocast casts to)."""
    return Precision.FP16 if on_gpu(device) else Precision.BF16


def on_gpu(device: str) -> bool:
    return str(device).startswith("cuda")


def config(device, batch, imgsz, precision, backend="eager") -> EngineConfig:
    """The NHWC engine config of a technique's point (no build-time check: rows check
    themselves against eager fp32)."""
    return EngineConfig(backend=backend, precision=precision, layout="nhwc", batch=batch,
                        imgsz=imgsz, device=device, check=False)  # fmt: skip


def sync(device) -> None:
    if on_gpu(device):
        torch.cuda.synchronize()


def eager_runner(module, cfg: EngineConfig, autocast: Precision | None = None) -> Callable:
    """``run(x)``: one forward of ``module`` (numerics of ``cfg``, inference mode), under
    ``torch.autocast`` to ``autocast`` when given (no cast cache: a CUDA graph can hold it)."""
    device_type = "cuda" if on_gpu(cfg.device) else "cpu"

    def run(x):
        with numerics(cfg), torch.inference_mode():
            if autocast is None:
                return head_tensor(module(x))
            with torch.autocast(device_type, dtype=TORCH_DTYPES[autocast], cache_enabled=False):
                return head_tensor(module(x))

    return run


def graph_runner(fn: Callable, static_in: torch.Tensor, warmup: int = 3):
    """``(run, close)``: ``fn(static_in)`` captured in one CUDA graph as the cudagraph engine
    does (warm-up on a side stream, cached blocks released, capture); ``run(x)`` copies ``x``
    into the static input unless it is that tensor, replays and returns the static output."""
    if not static_in.is_cuda:
        raise NotAvailableError("backend cudagraph needs a CUDA device; use backend eager on CPU")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn(static_in)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(static_in)
    torch.cuda.synchronize()

    def run(x):
        if x is not static_in:
            static_in.copy_(x)
        graph.replay()
        return static_out

    return run, graph.reset


def runner(fn: Callable, cfg: EngineConfig, static_in: torch.Tensor):
    """``(run, close)`` of ``fn`` for the config's backend (eager, cudagraph)."""
    if cfg.backend.value == "eager":
        return fn, lambda: None
    if cfg.backend.value == "cudagraph":
        return graph_runner(fn, static_in)
    raise UserError(f"techniques run the backends {', '.join(BACKENDS)}, not {cfg.backend.value}")


def kernel_mix(fn: Callable, device: str, iters: int = 2) -> dict:
    """Kernels per call and the kernel classes' shares of kernel time from a Kineto pass of
    ``iters`` calls (:func:`yolo_sm.core.profiling.kineto.capture`,
    :func:`yolo_sm.topics.techniques.analyse.kernel_mix_of`); NaN on a CPU."""
    if not on_gpu(device):
        return kernel_mix_of(None, iters)
    with tempfile.TemporaryDirectory() as tmp:
        path = kineto.capture(fn, Path(tmp) / "mix.json.gz", iters=iters, warmup=1, device=device,
                              provenance={"device": device})  # fmt: skip
        return kernel_mix_of(kineto.load_kernels(path), iters)


def timed(fn, batch, device, warmup_ms, budget_ms, label="") -> dict:
    """:func:`yolo_sm.core.timing.measure` of ``fn``, as a row's summary columns."""
    return measure(fn, batch=batch, device=device, warmup_ms=warmup_ms, budget_ms=budget_ms,
                   label=label, with_provenance=False).summary()  # fmt: skip


def point(row: dict, work: Callable, *args) -> dict:
    """``row`` with what ``work(*args)`` measured, or with the failure's status and message."""
    try:
        return {**row, "status": "ok", "message": "", **work(*args)}
    except Exception as e:  # noqa: BLE001 - every failure is a row, the table goes on
        return {**row, **failure(e)}
    finally:
        free_memory(collect=False)


def checked(row: dict, rel_err: float, precision: Precision) -> dict:
    """``rel_err`` into the row; beyond the precision's tolerance the row is an error."""
    row["rel_err"] = rel_err
    tol = TOLERANCE[precision]
    if not rel_err <= tol:
        row.update(
            status="error",
            message=f"relative L2 error {rel_err:.3g} vs eager fp32 exceeds the "
            f"{precision.value} tolerance {tol:g}",
        )
    return row


def forward_point(model, cfg, ref, autocast, warmup_ms, budget_ms, iters) -> dict:
    """One forward point: ``model`` in ``cfg``'s precision (or fp32 under autocast to
    ``autocast``) for ``cfg``'s backend, its error against ``ref`` on the bundled photos, its
    timing on them, and (eager rows: a CUDA graph replays the same kernels) its kernel mix."""
    module_cfg = cfg if autocast is None else config(cfg.device, cfg.batch, cfg.imgsz, "fp32")
    module = prepare_module(model, module_cfg)
    static_in = make_input(module_cfg, seed=0)
    run, close = runner(eager_runner(module, module_cfg, autocast), cfg, static_in)
    try:
        photos = photo_input(module_cfg)
        with torch.no_grad():
            rel = relative_l2(head_tensor(run(photos)).clone(), ref)
        # timed on the photos: the graph's static input holds them since the check
        x = photos if cfg.backend.value == "eager" else static_in
        out = timed(lambda: run(x), cfg.batch, cfg.device, warmup_ms, budget_ms, cfg.label())
        if cfg.backend.value == "eager":
            out.update(kernel_mix(lambda: run(x), cfg.device, iters))
        return checked(out, rel, cfg.precision)
    finally:
        close()
        sync(cfg.device)

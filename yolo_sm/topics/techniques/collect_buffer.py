"""Technique 3 of :mod:`yolo_sm.topics.techniques.collect`: a batch of per-frame device tensors
assembled by a new ``torch.stack`` per step against writing into a buffer allocated once."""

from __future__ import annotations

from collections.abc import Callable

import torch

from yolo_sm.core.engines.base import make_input
from yolo_sm.core.engines.torch_backends import prepare_module
from yolo_sm.core.timing import host_profile
from yolo_sm.topics.techniques.collect_autocast import yolo
from yolo_sm.topics.techniques.collect_run import (
    BACKENDS,
    TORCH_DTYPES,
    config,
    eager_runner,
    low_precision,
    point,
    runner,
    sync,
    timed,
)

BUFFER_VARIANTS = ("stack_new", "prealloc_copy", "prealloc_stack_out")


def frames_on(device, n: int, imgsz: int, dtype, seed: int = 0) -> list[torch.Tensor]:
    """``n`` decoded frames as per-frame device tensors (H, W, 3) in ``dtype``, in [0, 1)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return [torch.rand(imgsz, imgsz, 3, generator=gen, device=device).to(dtype) for _ in range(n)]


def assemblers(
    frames: list[torch.Tensor], buf: torch.Tensor, view: torch.Tensor | None = None
) -> dict[str, Callable]:
    """Per buffer variant, a function that assembles ``frames`` into an NHWC batch and returns
    it as a channels-last (B, 3, H, W) tensor: a new one per call (``stack_new``) or ``view``
    (default ``buf.permute(0, 3, 1, 2)``; a CUDA graph's static input, of which ``buf`` is the
    (B, H, W, 3) view) after writing ``buf`` in place (``prealloc_copy``: one ``copy_`` per
    frame; ``prealloc_stack_out``: ``torch.stack(out=buf)``)."""
    view = buf.permute(0, 3, 1, 2) if view is None else view

    def stack_new():
        return torch.stack(frames).permute(0, 3, 1, 2)

    def prealloc_copy():
        for i, f in enumerate(frames):
            buf[i].copy_(f)
        return view

    def prealloc_stack_out():
        torch.stack(frames, out=buf)
        return view

    return dict(zip(BUFFER_VARIANTS, (stack_new, prealloc_copy, prealloc_stack_out), strict=True))


def buffer_engine(model, cfg):
    """``(run, close, buf, view)``: the forward of ``model`` for ``cfg``, the (B, H, W, 3) buffer
    the prealloc variants write into and the (B, 3, H, W) tensor they hand to ``run``. For a
    CUDA graph that is the graph's static input itself (a channels-last (B, 3, H, W) tensor is
    (B, H, W, 3) in memory), so ``run`` copies nothing."""
    module = prepare_module(model, cfg)
    static_in = make_input(cfg, seed=0)
    run, close = runner(eager_runner(module, cfg), cfg, static_in)
    if cfg.backend.value == "cudagraph":
        return run, close, static_in.permute(0, 2, 3, 1), static_in
    shape = (cfg.batch, cfg.imgsz, cfg.imgsz, 3)
    buf = torch.empty(shape, dtype=static_in.dtype, device=cfg.device)
    return run, close, buf, buf.permute(0, 3, 1, 2)


def _assembly(fn, batch, device, warmup_ms, budget_ms, label) -> dict:
    return {
        **timed(fn, batch, device, warmup_ms, budget_ms, label),
        **host_profile(fn, device=device),
    }


def _step(built, cfg, frames, variant, warmup_ms, budget_ms) -> dict:
    """Assembly + forward of one variant on a built ``(run, close, buf, view)`` (or its build's
    error)."""
    if isinstance(built, BaseException):
        raise built
    run, _, buf, view = built
    assemble = assemblers(frames, buf, view)[variant]
    if variant != "stack_new" and assemble().data_ptr() != buf.data_ptr():
        raise RuntimeError(f"{variant} did not write into its buffer")
    label = f"{cfg.label()} {variant}"
    return timed(lambda: run(assemble()), cfg.batch, cfg.device, warmup_ms, budget_ms, label)


def buffer_rows(
    *,
    width=0.5,
    batches=(16, 64),
    backends=BACKENDS,
    imgsz=640,
    device="cuda",
    warmup_ms=30.0,
    budget_ms=150.0,
    models: dict | None = None,
) -> list[dict]:
    """Per batch: each variant's assembly alone (scope ``assembly``, with its launches), then per
    backend assembly + forward of YOLOv8 ``width`` in the 16-bit type, NHWC (scope ``step``)."""
    prec = low_precision(device)
    model = yolo(width, models)
    rows = []
    for batch in batches:
        head = {"technique": "batch_buffer", "model": f"yolov8:{float(width):g}",
                "family": "yolov8", "width": float(width), "batch": batch, "imgsz": imgsz,
                "precision": prec.value, "layout": "nhwc", "device": device}  # fmt: skip
        frames = frames_on(device, batch, imgsz, TORCH_DTYPES[prec])
        buf = torch.empty(batch, imgsz, imgsz, 3, dtype=TORCH_DTYPES[prec], device=device)
        for variant, fn in assemblers(frames, buf).items():
            row = {**head, "variant": variant, "backend": "none", "scope": "assembly",
                   "static_buffer": variant != "stack_new", "graph_input_copy": False}  # fmt: skip
            rows.append(point(row, _assembly, fn, batch, device, warmup_ms, budget_ms, variant))
        for backend in backends:
            cfg = config(device, batch, imgsz, prec, backend)
            try:
                built = buffer_engine(model, cfg)
            except Exception as e:  # noqa: BLE001 - the build's failure is each variant's row
                built = e
            for variant in BUFFER_VARIANTS:
                row = {**head, "variant": variant, "backend": backend, "scope": "step"}
                row["static_buffer"] = variant != "stack_new"
                row["graph_input_copy"] = backend == "cudagraph" and variant == "stack_new"
                rows.append(point(row, _step, built, cfg, frames, variant, warmup_ms, budget_ms))
            if not isinstance(built, BaseException):
                built[1]()
            del built
            sync(device)
        del frames, buf
    return rows

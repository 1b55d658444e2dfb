"""Fixed engines (one per letterboxed frame shape, a CUDA graph by default) against dynamic ones
(eager or ``torch.compile(dynamic=True)``), timed in one process: img/s, megapixels/s, launches."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from yolo_sm.contract.scrub import user_argv
from yolo_sm.contract.store import write_atomic
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.engines.base import Engine, head_tensor, numerics, verify
from yolo_sm.core.engines.torch_backends import build_eager, prepare_module
from yolo_sm.core.grid import free_memory
from yolo_sm.core.models import build_yolo
from yolo_sm.core.provenance import stamp
from yolo_sm.core.sweep import SweepSpec, check_environment, failure, host_columns
from yolo_sm.core.timing import measure_engine
from yolo_sm.topics.resolutions import ResolutionStep
from yolo_sm.topics.resolutions.analyse import engine_hw, parse_frame


class ResolutionSpec(ResolutionStep):
    """A resolutions step's spec with the sweep's own checks of its models."""

    def validated(self) -> ResolutionSpec:
        SweepSpec(
            family=(self.family,), widths=self.widths, depth=(self.depth,), device=self.device
        ).validated()
        return self


def _config(spec: ResolutionSpec, backend: str, hw: tuple[int, int]) -> EngineConfig:
    kw = {k: getattr(spec, k) for k in ("precision", "layout", "batch", "device", "check")}
    return EngineConfig(backend=backend, imgsz_hw=hw, **kw)


class DynamicEngine:
    """One engine for every input shape (eager or dynamic compile), prepared once;
    :meth:`at` gives an :class:`Engine` of it for one shape."""

    def __init__(self, model, spec: ResolutionSpec, kind: str, hw: tuple[int, int]):
        import torch

        self.kind = kind
        self.spec = spec
        cfg = _config(spec, "eager", hw)
        if kind == "eager":
            self.module = build_eager(model, replace(cfg, check=False)).module
            self.fn = self.module
            self.grad = torch.inference_mode
        else:
            self.module = prepare_module(model, cfg)
            self.fn = torch.compile(self.module, dynamic=True)
            self.grad = torch.no_grad  # compiled graphs guard on inference-mode tensors

    def at(self, model, hw: tuple[int, int]) -> Engine:
        cfg = _config(self.spec, "eager" if self.kind == "eager" else "compile", hw)
        fn, grad = self.fn, self.grad
        before = compiled_graphs()
        info: dict = {}

        def run(x):
            with numerics(cfg), grad():
                out = head_tensor(fn(x))
            info["recompiles"] = compiled_graphs() - before
            return out

        desc = f"dynamic {self.kind} {cfg.precision.value}"
        eng = Engine(cfg, run, desc, info, module=self.module)
        t0 = time.perf_counter()
        if cfg.check:
            verify(eng, model)
        else:
            eng(eng.make_input())
        info["first_call_s"] = time.perf_counter() - t0
        return eng


def _row(spec, width, frame, hw, engine_kind, backend) -> dict:
    fw, fh = (int(v) for v in frame.split("x"))
    return {"family": spec.family, "width": float(width), "depth": float(spec.depth),
            "batch": int(spec.batch), "precision": spec.precision, "layout": spec.layout,
            "device": spec.device, "frame_size": frame, "frame_w": fw, "frame_h": fh,
            "imgsz_h": int(hw[0]), "imgsz_w": int(hw[1]), "engine": engine_kind,
            "backend": backend, "status": "ok", "message": ""}  # fmt: skip


def _timed(row: dict, make_engine, spec: ResolutionSpec) -> dict:
    """``row`` with the timing of the engine ``make_engine()`` builds (closed after)."""
    on_gpu = spec.device.startswith("cuda")
    eng = None
    try:
        t0 = time.perf_counter()
        eng = make_engine()
        row["build_s"] = time.perf_counter() - t0
        row["rel_err"] = eng.rel_err
        m = measure_engine(eng, warmup_ms=spec.warmup_ms, budget_ms=spec.budget_ms)
        row.update(m.summary())
        row["mpix_per_s"] = m.img_per_s * row["imgsz_h"] * row["imgsz_w"] / 1e6
        row.update(host_columns(eng, m.median_ms, on_gpu))
        for k in ("recompiles", "first_call_s", "capture_s"):
            if k in eng.info:
                row[k] = eng.info[k]
        row.update(stamp(m.provenance))
    except Exception as e:  # noqa: BLE001 - a failed engine is a row; the others still run
        row.update(failure(e))
    finally:
        if eng is not None:
            eng.close()
        free_memory(collect=row["status"] != "ok")
    return row


def run_resolutions(spec: ResolutionSpec, out: str | os.PathLike | None, progress: bool = True):
    """Time every (width, frame, engine) of ``spec``: per width the model and its dynamic
    engines once, per frame a fixed engine for its letterboxed size, then each dynamic one."""
    import pandas as pd

    spec = spec.validated()
    check_environment(
        SweepSpec(family=(spec.family,), backends=(spec.fixed_backend,), device=spec.device)
    )
    t0 = time.monotonic()
    rows = []
    for w in spec.widths:
        model = build_yolo(spec.family, w, depth=spec.depth)
        sizes = [(f, engine_hw(parse_frame(f))) for f in spec.frames]
        dyn = {}
        for kind in spec.dynamic:
            try:
                dyn[kind] = DynamicEngine(model, spec, kind, sizes[0][1])
            except Exception as e:  # noqa: BLE001 - its rows say why
                dyn[kind] = e
        for frame, hw in sizes:
            if progress:
                print(f"resolutions: w{w:g} {frame} -> {hw[1]}x{hw[0]}", file=sys.stderr)
            row = _row(spec, w, frame, hw, "fixed", spec.fixed_backend)
            fixed = _config(spec, spec.fixed_backend, hw)
            rows.append(_timed(row, lambda m=model, c=fixed: build_engine(m, c), spec))
            for kind, d in dyn.items():
                row = _row(spec, w, frame, hw, "dynamic", kind)
                if isinstance(d, Exception):
                    rows.append({**row, **failure(d)})
                    continue
                rows.append(_timed(row, lambda d=d, hw=hw, m=model: d.at(m, hw), spec))
        del dyn, model
        free_memory()
    df = pd.DataFrame(rows)
    for c in ("rel_err", "build_s", "recompiles", "first_call_s"):
        if c in df:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    if out is not None:
        meta = {"spec": asdict(spec), "argv": user_argv(sys.argv), "seconds": time.monotonic() - t0}
        write_atomic(df, Path(out), meta)
    return df


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"].get("unique_graphs", 0))

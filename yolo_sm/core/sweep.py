"""Sweeps: a grid as data -> one tidy, resumable parquet row per point (coordinates, status,
timing with raw ``samples_ms``, numerical check, FLOPs, memory, provenance)."""

from __future__ import annotations

import itertools
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from yolo_sm.analyse.hostbound import host_bound_rule
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import KEY_COLUMNS, REQUIRED
from yolo_sm.contract.steps import SweepStep
from yolo_sm.contract.store import check_output_path, write_atomic  # noqa: F401 (re-exported)
from yolo_sm.contract.vocab import unsupported
from yolo_sm.contract.workload import clear, publish
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.engines.base import CHECK_INPUT
from yolo_sm.core.engines.qconv import fallbacks, plan_sources
from yolo_sm.core.environment import check_backends, check_device
from yolo_sm.core.grid import Pace, free_memory, pending, run_grid, run_pace, table_rows
from yolo_sm.core.models import FAMILIES, MAX_WIDTH, MIN_WIDTH, build_yolo, model_flops, preset
from yolo_sm.core.models.spec import (
    build_spec,
    parse_model,
    parse_models,
    spec_scale,
    weights_calibrated,
)
from yolo_sm.core.stopwatch import phase
from yolo_sm.core.timing import engine_call, host_profile, launch_cost_us, measure_engine


@dataclass(frozen=True)
class Point:
    family: str
    scale: str  # preset letter, "" for a plain width multiplier
    width: float
    depth: float
    max_channels: int
    precision: str
    layout: str
    backend: str
    batch: int
    imgsz: int
    compile_mode: str
    device: str
    model: str = ""  # the model spec (collect.models.spec); "" in points built by family

    def key(self) -> tuple:
        return tuple(getattr(self, c) for c in KEY_COLUMNS)

    def model_key(self) -> tuple:
        key = (self.family, self.scale, self.width, self.depth, self.max_channels)
        return (*key, self.model) if self.model else key


#: most points one sweep may ask for (each is timed for its budget: a larger grid is a typo)
MAX_POINTS = 100_000


#: the lists a sweep takes each value of once
DISTINCT = ("family", "precisions", "layouts", "backends")


class SweepSpec(SweepStep):
    """A sweep step's spec with the checks that need the models: known families, widths in
    range, at most :data:`MAX_POINTS` points; :data:`DISTINCT` lists deduplicated."""

    def validated(self) -> SweepSpec:
        spec = super().validated()
        bad = [f for f in spec.family if f not in FAMILIES]
        if bad:
            raise UserError(f"unknown family {bad[0]!r}: choose one of {', '.join(FAMILIES)}")
        for w in spec.widths:
            if not isinstance(w, str) and not MIN_WIDTH <= w <= MAX_WIDTH:
                raise UserError(
                    f"width must be between {MIN_WIDTH} and {MAX_WIDTH} (or n/s/m/l/x), got {w:g}"
                )
        kw = {k: tuple(dict.fromkeys(getattr(spec, k))) for k in DISTINCT}
        grid = len(spec.models) or len(kw["family"]) * len(spec.widths)
        for n in (spec.depth, *(kw[k] for k in DISTINCT[1:]), spec.batches, spec.imgsz):
            grid *= len(n)
        if grid > MAX_POINTS:
            raise UserError(
                f"the sweep asks for {grid:,} points, more than {MAX_POINTS:,}: split it into "
                "several sweeps"
            )
        models = parse_models(spec.models or None, spec.input_shape, need_shape=False)
        files = [m for m in models if m.kind != "family"]
        for a, b in itertools.combinations(files, 2):
            if a.name == b.name:
                raise UserError(
                    f"models {a.source} and {b.source} share the label {a.name}: name one "
                    "with LABEL=PATH"
                )
        return replace(spec, models=tuple(m.text for m in models), **kw)

    def points(self) -> list[Point]:
        """Every supported point, ordered so that each model and engine is built once."""
        models = [parse_model(m, self.input_shape, need_shape=False) for m in self.models]
        grid = [(m.source, m.width, d, m) for m in models if m.kind == "family" for d in self.depth]
        if not models:
            grid = [(*fwd, None) for fwd in itertools.product(self.family, self.widths, self.depth)]
        heads = []  # ((family, scale, width, depth, max_channels), model text, image sizes)
        for fam, w, d, m in grid:
            text = "" if m is None else m.text
            if m is not None and (fam == "wide" or fam.startswith("resnet")):
                key = (fam, "", float(w), 1.0, 0)
            elif isinstance(w, str):
                p_depth, p_width, p_max = preset(fam, w)
                key = (fam, w, p_width, float(p_depth if d is None else d), int(p_max))
            else:
                depth = 0.33 if d is None else d
                key = (fam, "", float(w), float(depth), int(self.max_channels))
            heads.append((key, text, self.imgsz))
        for m in models:
            if m.kind != "family":
                sizes = (m.imgsz,) if m.imgsz else self.imgsz
                heads.append(((m.name, "", *spec_scale(m)), m.text, sizes))
        out = [
            Point(*key, prec, lay, back, int(b), int(size), self.compile_mode, self.device, text)
            for key, text, sizes in heads
            for prec, lay, back, size, b in itertools.product(
                self.precisions, self.layouts, self.backends, sizes, self.batches
            )
        ]
        return [p for p in dict.fromkeys(out) if unsupported_reason(p) is None]

    def unsupported(self) -> list[str]:
        """The precision/layout/backend combinations that :meth:`points` leaves out, and why."""
        out = []
        for prec, lay, back in itertools.product(self.precisions, self.layouts, self.backends):
            p = Point("", "", 1.0, 0.33, 1, prec, lay, back, 1, 32, self.compile_mode, self.device)
            reason = unsupported_reason(p)
            if reason:
                out.append(f"{back}/{prec}/{lay}: {reason}")
        return out


def unsupported_reason(p: Point) -> str | None:
    """Why a grid combination cannot run (left out of the sweep), or None."""
    return unsupported(p.precision, p.layout, p.backend, p.device)


def check_environment(spec: SweepSpec) -> None:
    """One sentence, before any work, where the device, a backend or a model is missing."""
    check_device(spec.device)
    check_backends(spec.backends)
    if "cudagraph" in spec.backends and not spec.device.startswith("cuda"):
        raise UserError("backend cudagraph needs --device cuda")
    for text in spec.models:  # each model file built once: one that cannot load is one sentence
        m = parse_model(text, spec.input_shape, need_shape=False)
        if m.kind != "family":
            build_spec(m, input_shape=m.input_shape or (3, spec.imgsz[0], spec.imgsz[0]))


def missing_points(spec: SweepSpec, out: str | os.PathLike) -> list[Point]:
    """The points of ``spec`` that ``out`` does not hold yet (all of them if it is absent)."""
    rows = table_rows(Path(out), KEY_COLUMNS, "sweep")
    return pending(spec.validated().points(), rows, Point.key, _row_key)


def _row_key(row: dict) -> tuple:
    return tuple(row[c] for c in KEY_COLUMNS)


#: the phase columns of a sweep row: together its seconds, but for the model's own build
PHASE_COLUMNS = ("build_s", "warmup_s", "timed_s", "profile_s")


def point_pace(p: Point, pace: Pace) -> float:
    """Estimated seconds of ``p``: an ok row's phase seconds of the same config at the nearest
    width (times the squared width ratio when wider); at least this run's mean pace."""
    same = (p.family, p.model, p.precision, p.layout, p.backend, p.batch, p.imgsz)
    best = None
    for r in pace.rows:
        model = r.get("model") if isinstance(r.get("model"), str) else ""  # NaN: older tables
        key = (r.get("family"), model, r.get("precision"), r.get("layout"))
        key += (r.get("backend"), r.get("batch"), r.get("imgsz"))
        if key != same or r.get("status") != "ok":
            continue
        secs = [r.get(c) for c in PHASE_COLUMNS]
        if any(not isinstance(v, (int, float)) or v != v for v in secs):  # absent or NaN
            continue
        width = float(r.get("width") or 0.0)
        if width <= 0:
            continue
        near = (abs(width - p.width), -width)  # the nearest width, the wider one on a tie
        if best is None or near < best[0]:
            best = (near, width, sum(secs))
    if best is None:
        return run_pace(p, pace)
    _, width, seconds = best
    return max(seconds * max(1.0, (p.width / width) ** 2), run_pace(p, pace))


def run_sweep(
    spec: SweepSpec, out: str | os.PathLike, progress: bool = True, deadline: float | None = None
):
    """Run every point of ``spec`` not already in ``out``; returns the full table. A model's
    points start only if all fit before ``deadline`` (``time.monotonic()``, :func:`point_pace`)."""
    spec = spec.validated()
    check_environment(spec)
    publish(workload="sweep")  # the status file a monitor beside it reads (contract.workload)

    def open_model(p: Point) -> dict:
        try:
            return {"model": build_model(p), "flops": {}}
        except Exception as e:  # noqa: BLE001 - a broken model config becomes error rows
            return {"error": e}

    def measure(p: Point, state: dict) -> list[dict]:
        if "error" in state:
            return [_error_row(p, spec, state["error"])]
        flops = state["flops"]
        if p.imgsz not in flops:
            flops[p.imgsz] = model_flops(state["model"], p.imgsz)
        return [run_point(state["model"], p, spec, flops[p.imgsz])]

    table = run_grid(
        spec.points(),
        measure,
        key=Point.key,
        row_key=_row_key,
        group=Point.model_key,
        open_group=open_model,
        out=out,
        columns=KEY_COLUMNS,
        kind="sweep",
        metadata={"spec": asdict(spec), "argv": sys.argv},
        deadline=deadline,
        estimate=point_pace,
        clock=time.monotonic,
        describe=lambda p: (
            f"{p.family} w{p.width:g} {p.backend} {p.precision} {p.layout} b{p.batch}"
        ),
        progress=progress,
        device=spec.device,
    )
    clear()  # nothing runs any more
    return table


def build_model(p: Point):
    """The model of a point: its spec, or its YOLO family, width or preset, depth and cap."""
    if p.model:
        spec = parse_model(p.model, need_shape=False)
        if spec.kind == "module":
            spec = parse_model(spec, (3, p.imgsz, p.imgsz))
        if spec.kind != "family" or not spec.source.startswith("yolo"):
            return build_spec(spec)
    return build_yolo(p.family, p.scale or p.width, depth=p.depth, max_channels=p.max_channels)


def engine_config(p: Point, check: bool = True) -> EngineConfig:
    shape = (p.batch, p.imgsz, p.device, p.compile_mode)
    return EngineConfig(p.backend, p.precision, p.layout, *shape, check=check)


# what an engine's ``info`` says about its build that a point's row carries
ENGINE_INFO_COLUMNS = (
    "compile_s", "compile_first_s", "compile_cache", "autotuned_ops", "autotune_reads",
    "capture_s", "graph_pool_bytes", "recompiles", "graphs_compiled",
)  # fmt: skip


def run_point(model, p: Point, spec: SweepSpec, flops_per_img: int, extra=None) -> dict:
    """Build, check and time one point (failures become rows, memory is freed);
    ``extra(engine)`` adds columns measured after the timed calls."""
    import torch

    engine, row = open_point(model, p, spec, flops_per_img)
    try:
        if engine is not None:
            m = measure_engine(engine, warmup_ms=spec.warmup_ms, budget_ms=spec.budget_ms)
            if p.device.startswith("cuda"):
                row["peak_mem_bytes"] = torch.cuda.max_memory_allocated()
            row = finish_point(engine, row, m, p, extra)
    except Exception as e:  # noqa: BLE001 - every failure is recorded, the sweep goes on
        row = {**_error_row(p, spec, e, flops_per_img), "build_s": row.get("build_s")}
    finally:
        if engine is not None:
            engine.close()
        del engine
        free_memory(collect=row["status"] != "ok")
    return row


def open_point(model, p: Point, spec: SweepSpec, flops_per_img: int):
    """Build and check one point's engine: (engine, its row so far) or (None, an error row); on
    a GPU the peak-memory counter restarts after the build."""
    import torch

    on_gpu = p.device.startswith("cuda")
    row = _row_head(p, spec, flops_per_img)
    publish(model=p.model or f"{p.family}:{p.width:g}", engine=f"{p.backend}/{p.precision}/"
            f"{p.layout}", batch=p.batch)  # fmt: skip
    build = None
    try:
        if on_gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        with phase("build") as build:
            engine = build_engine(model, engine_config(p, spec.check))
        row.update(build_s=build.seconds, rel_err=engine.rel_err)
        if on_gpu:
            # the build's peak includes the check's fp32 reference forward: reported apart
            row["build_peak_mem_bytes"] = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()  # the peak restarts from what is allocated now
        return engine, row
    except Exception as e:  # noqa: BLE001 - every failure is recorded, the sweep goes on
        row = _error_row(p, spec, e, flops_per_img)
        if build is not None:  # the build ran, to its end or to the failure: its seconds count
            row["build_s"] = build.seconds
        free_memory(collect=True)
        return None, row


def finish_point(engine, row: dict, m, p: Point, extra=None) -> dict:
    """``row`` with measurement ``m`` of ``engine``: summary, TFLOP/s, host columns,
    ``extra(engine)``, build info, 8-bit counts and provenance."""
    row = {**row, **m.summary(), "warmup_s": m.warmup_s, "timed_s": m.timed_s}
    row["tflops"] = (row["flops_per_img"] or 0) * p.batch / (m.median_ms * 1e-3) / 1e12
    with phase("profile") as prof:
        row.update(host_columns(engine, m.median_ms, p.device.startswith("cuda")))
        if extra is not None:
            row.update(extra(engine))
    row["profile_s"] = prof.seconds
    row.update({k: engine.info[k] for k in ENGINE_INFO_COLUMNS if k in engine.info})
    row.update(quant_columns(engine))
    row.update({f"prov_{k}": v for k, v in m.provenance.items()})
    return row


def quant_columns(engine) -> dict:
    """8-bit engines' ``quant_convs``, ``quant_fallbacks``, ``quant_handoffs`` (int8),
    ``quant_plans_cached`` (GPU); empty otherwise."""
    m = engine.module
    info = getattr(m, "fp8_info", None) or getattr(m, "int8_info", None)
    if m is None or not info:
        return {}
    convs = info.get("fp8_convs", info.get("int8_convs"))
    out = {"quant_convs": convs, "quant_fallbacks": len(fallbacks(m))}
    if "int8_handoffs" in info:
        out["quant_handoffs"] = info["int8_handoffs"]
    sources = plan_sources(m)
    if sources:  # cuDNN graphs ran (a GPU)
        out["quant_plans_cached"] = sources.get("disk", 0)
    return out


def host_columns(engine, median_ms: float, on_gpu: bool) -> dict:
    """Host columns of a timed point from a short profiler pass (``host_bound`` False on a CPU,
    None where the pass failed)."""
    import math

    try:
        h = host_profile(engine_call(engine), device=engine.config.device)
        h["host_launch_us"] = launch_cost_us(engine.config.device)
    except Exception:  # noqa: BLE001 - no profiler (e.g. CUPTI busy): the figures are unknown
        unknown = "launches_per_forward kernels_per_forward gpu_busy_ms host_launch_us"
        return {**dict.fromkeys(unknown.split(), math.nan), "gpu_busy_fraction": math.nan,
                "host_bound": None}  # fmt: skip
    if not on_gpu:
        return {**h, "gpu_busy_fraction": math.nan, "host_bound": False}
    busy = h["gpu_busy_ms"] / median_ms if median_ms > 0 else math.nan
    return {
        **h,
        "gpu_busy_fraction": busy,
        "host_bound": bool(host_bound_rule(busy, h["launches_per_forward"])),
    }


def failure(e: BaseException) -> dict:
    """``status`` (oom / error) and a one-line ``message`` for a point that failed."""
    msg = f"{type(e).__name__}: {e}".strip().splitlines()[0][:500]
    return {"status": "oom" if is_oom(e) else "error", "message": msg}


def _row_head(p: Point, spec: SweepSpec, flops_per_img=None) -> dict:
    """A point's key (its model spec as a column after it), status, message and fixed columns."""
    calibrated = not p.model or weights_calibrated(parse_model(p.model, need_shape=False))
    return {
        **{k: v for k, v in asdict(p).items() if k != "model"},
        "status": "ok",
        "message": "",
        "model": p.model,
        "flops_per_img": flops_per_img,
        "bn_calibrated": calibrated,
        "check_input": CHECK_INPUT if spec.check else "off",
    }


def _error_row(p: Point, spec: SweepSpec, e: BaseException, flops_per_img=None) -> dict:
    # every column of the schema, empty: a table of error rows alone is still a sweep table
    return {**dict.fromkeys(REQUIRED["sweep"]), **_row_head(p, spec, flops_per_img), **failure(e)}


def all_failed(df) -> str | None:
    """Why none of a sweep table's points was timed (the commonest reason); None if one was."""
    if df is None or not len(df) or (df["status"] == "ok").any():
        return None
    msg = df["message"].fillna("").astype(str)
    kind = msg.str.partition(":")[0]
    top = kind.value_counts().index[0]
    reason = msg[kind == top].iloc[0].rstrip(".") or "no message"
    flag = (
        "; a model with random weights may differ at low precision by design: add --check off "
        "(a plan step: check: false) to time it without the check"
        if top == "NumericalMismatch"
        else ""
    )
    return (
        f"none of the {len(df)} sweep points was timed; {(kind == top).sum()} failed with "
        f"{reason}{flag}"
    )


def is_oom(e: BaseException) -> bool:
    import torch

    if isinstance(e, (torch.OutOfMemoryError, MemoryError)):  # MemoryError: a CPU's host RAM
        return True
    text = str(e).lower()
    return "out of memory" in text or "alloc_failed" in text

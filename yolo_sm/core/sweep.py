"""Sweeps: a grid as data -> resumable runs -> one tidy parquet row per point.

A point's row leads with its coordinates (family, width, depth, max_channels, scale, precision,
layout, backend, batch, imgsz, compile_mode, device), then ``status`` (ok / oom / error) and
``message``, the timing summary with raw ``samples_ms``, the numerical check, FLOPs and
throughput, peak memory and provenance. A sweep is :func:`run_point` over the grid runner
(:func:`yolo_sm.core.grid.run_grid`): one model's points run together, the table is
rewritten atomically after every point, and rerunning the same command skips done points.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from yolo_sm.analyse import plan_grid
from yolo_sm.analyse.hostbound import host_bound_rule
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.schema import KEY_COLUMNS, REQUIRED
from yolo_sm.contract.steps import SweepStep
from yolo_sm.contract.store import check_output_path, write_atomic  # noqa: F401 (re-exported)
from yolo_sm.contract.workload import clear, publish
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.engines.base import CHECK_INPUT
from yolo_sm.core.engines.qconv import fallbacks, plan_sources
from yolo_sm.core.grid import (
    Pace,
    free_memory,
    pending,
    run_grid,
    run_pace,
    table_rows,
)
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
    """A sweep step's spec (:class:`~yolo_sm.contract.steps.SweepStep`) with the checks that
    need the model families and files: known families, widths in their range, model files
    that exist, at most :data:`MAX_POINTS` points; :data:`DISTINCT` lists deduplicated."""

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

        out = []
        models = [parse_model(m, self.input_shape, need_shape=False) for m in self.models]
        grid = [(m.source, m.width, d, m) for m in models if m.kind == "family" for d in self.depth]
        if not models:
            grid = [(*fwd, None) for fwd in itertools.product(self.family, self.widths, self.depth)]
        for fam, w, d, m in grid:
            if m is not None and (fam == "wide" or fam.startswith("resnet")):
                scale, width, depth, max_ch = "", float(w), 1.0, 0
            elif isinstance(w, str):
                p_depth, p_width, p_max = preset(fam, w)
                scale, width, depth, max_ch = w, p_width, p_depth if d is None else d, p_max
            else:
                scale, width, depth, max_ch = (
                    "",
                    float(w),
                    0.33 if d is None else d,
                    self.max_channels,
                )
            for prec, lay, back, size, b in itertools.product(
                self.precisions, self.layouts, self.backends, self.imgsz, self.batches
            ):
                out.append(
                    Point(
                        fam,
                        scale,
                        width,
                        float(depth),
                        int(max_ch),
                        prec,
                        lay,
                        back,
                        int(b),
                        int(size),
                        self.compile_mode,
                        self.device,
                        "" if m is None else m.text,
                    )
                )
        for m in models:
            if m.kind != "family":
                width, depth, max_ch = spec_scale(m)
                sizes = (m.imgsz,) if m.imgsz else self.imgsz
                for prec, lay, back, size, b in itertools.product(
                    self.precisions, self.layouts, self.backends, sizes, self.batches
                ):
                    out.append(
                        Point(
                            m.name,
                            "",
                            width,
                            depth,
                            max_ch,
                            prec,
                            lay,
                            back,
                            int(b),
                            int(size),
                            self.compile_mode,
                            self.device,
                            m.text,
                        )
                    )
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
    """Why a grid combination cannot run (it is left out of the sweep), or None: the rules of
    :func:`yolo_sm.analyse.plan_grid.unsupported`, which reads a plan's grid without torch."""
    return plan_grid.unsupported(p.precision, p.layout, p.backend, p.device)


def check_environment(spec: SweepSpec) -> None:
    """Fail early, with one sentence, when the device or a requested backend is missing, or a
    model of the grid cannot be built (:func:`check_models`)."""
    import importlib.util

    import torch

    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        raise NotAvailableError(
            f"--device {spec.device} was requested but torch sees no CUDA GPU here; "
            "use --device cpu"
        )
    if "tensorrt" in spec.backends and importlib.util.find_spec("tensorrt") is None:
        raise NotAvailableError("backend tensorrt was requested but TensorRT is not installed here")
    if "onnxruntime" in spec.backends and importlib.util.find_spec("onnxruntime") is None:
        raise NotAvailableError(
            "backend onnxruntime was requested but onnxruntime is not installed here"
        )
    if "cudagraph" in spec.backends and not spec.device.startswith("cuda"):
        raise UserError("backend cudagraph needs --device cuda")
    check_models(spec)


# --- running --------------------------------------------------------------------------------


def missing_points(spec: SweepSpec, out: str | os.PathLike) -> list[Point]:
    """The points of ``spec`` that ``out`` does not hold yet (all of them if it is absent)."""
    return points_not_in(spec, table_rows(Path(out), KEY_COLUMNS, "sweep"))


def points_not_in(spec: SweepSpec, rows: list[dict]) -> list[Point]:
    """The points of ``spec`` that a sweep table's ``rows`` do not hold."""
    return pending(spec.validated().points(), rows, Point.key, _row_key)


def _row_key(row: dict) -> tuple:
    return tuple(row[c] for c in KEY_COLUMNS)


#: the phase columns of a sweep row: together its seconds, but for the model's own build
PHASE_COLUMNS = ("build_s", "warmup_s", "timed_s", "profile_s")


def point_pace(p: Point, pace: Pace) -> float:
    """Seconds point ``p`` will take, for the deadline's check that a model's points fit: the
    phase seconds of a measured ok row (this run's or the table's earlier ones) with the same
    model, precision, layout, backend, batch and image size at the nearest width, scaled by the
    squared width ratio where ``p`` is wider (a YOLO's FLOPs grow as its width squared and its
    engine builds, cuDNN autotuning mostly, grow with them: the H200's fp32-bf16 grid took
    3.4x longer to build at width 2.0 than at 1.0); at least this run's mean pace
    (:func:`~yolo_sm.core.grid.run_pace`), which also counts what the phases do not (the
    model's build). On the mean pace alone, the next width of a grid whose cost grows with
    width would start on the smaller widths' mean and be cut by the deadline half-measured."""
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
    """Run every point of ``spec`` not already in ``out``; returns the full table.

    ``deadline`` (a ``time.monotonic()`` value) stops the sweep before a point that would start
    after it, so one long plan fits several time-limited commands; rerun to continue. A model's
    points start only if all of them fit before the deadline at this run's pace so far (a model
    that does not fit is skipped, the next that fits runs), so that
    its precisions, layouts, backends and batches are measured side by side in one run; each
    point's seconds are estimated by :func:`point_pace`."""
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


def check_models(spec: SweepSpec) -> None:
    """Build each model of ``spec`` given as a file or module:function once, so that one that
    cannot load, or rejects its input shape, is one sentence before anything is written."""
    for text in spec.models:
        m = parse_model(text, spec.input_shape, need_shape=False)
        if m.kind != "family":
            build_spec(m, input_shape=m.input_shape or (3, spec.imgsz[0], spec.imgsz[0]))


def build_model(p: Point):
    """The model of a point: its spec (collect.models.spec), or its YOLO family, width or preset,
    depth and channel cap."""
    if p.model:
        spec = parse_model(p.model, need_shape=False)
        if spec.kind == "module":
            spec = parse_model(spec, (3, p.imgsz, p.imgsz))
        if spec.kind != "family" or not spec.source.startswith("yolo"):
            return build_spec(spec)
    return build_yolo(p.family, p.scale or p.width, depth=p.depth, max_channels=p.max_channels)


def _config(p: Point, spec: SweepSpec):

    return EngineConfig(
        backend=p.backend,
        precision=p.precision,
        layout=p.layout,
        batch=p.batch,
        imgsz=p.imgsz,
        device=p.device,
        compile_mode=p.compile_mode,
        check=spec.check,
    )


# what an engine's ``info`` says about its build that a point's row carries
ENGINE_INFO_COLUMNS = (
    "compile_s", "compile_first_s", "compile_cache", "autotuned_ops", "autotune_reads",
    "capture_s", "graph_pool_bytes", "recompiles", "graphs_compiled",
)  # fmt: skip


def run_point(model, p: Point, spec: SweepSpec, flops_per_img: int, extra=None) -> dict:
    """Build, check and time one point; OOM and engine failures become rows, memory is freed.
    The row records the wall seconds of each phase (``build_s``, ``warmup_s``, ``timed_s``,
    ``profile_s``: :mod:`yolo_sm.core.stopwatch`); an error row keeps ``build_s`` where the
    build ran (an engine that failed its numerical check was built all the same).
    ``extra(engine)`` (optional) returns more columns of the row, measured after the timed calls
    and the host profile, on the same engine (e.g. a profiler pass; its time counts as profile
    time)."""
    import torch

    on_gpu = p.device.startswith("cuda")
    engine = None
    row = {**_coords(p), "status": "ok", "message": "", **_row_tail(spec, flops_per_img, p)}
    engine_label = f"{p.backend}/{p.precision}/{p.layout}"
    publish(model=p.model or f"{p.family}:{p.width:g}", engine=engine_label, batch=p.batch)
    build = None
    try:
        if on_gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        with phase("build") as build:
            engine = build_engine(model, _config(p, spec))
        row["build_s"] = build.seconds
        row["rel_err"] = engine.rel_err
        if on_gpu:
            # the build's peak includes the fp32 reference forward of the check: report the
            # build and the timed calls apart (the latter is what an inference service needs)
            row["build_peak_mem_bytes"] = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()  # the peak restarts from what is allocated now
        m = measure_engine(engine, warmup_ms=spec.warmup_ms, budget_ms=spec.budget_ms)
        row.update(m.summary())
        row["tflops"] = flops_per_img * p.batch / (m.median_ms * 1e-3) / 1e12
        if on_gpu:
            row["peak_mem_bytes"] = torch.cuda.max_memory_allocated()
        row.update(warmup_s=m.warmup_s, timed_s=m.timed_s)
        with phase("profile") as prof:
            row.update(host_columns(engine, m.median_ms, on_gpu))
            if extra is not None:
                row.update(extra(engine))
        row["profile_s"] = prof.seconds
        for k in ENGINE_INFO_COLUMNS:
            if k in engine.info:
                row[k] = engine.info[k]
        row.update(quant_columns(engine))
        row.update({f"prov_{k}": v for k, v in m.provenance.items()})
    except Exception as e:  # noqa: BLE001 - every failure is recorded, the sweep goes on
        row = _error_row(p, spec, e, flops_per_img)
        if build is not None:  # the build ran, to its end or to the failure: its seconds count
            row["build_s"] = build.seconds
    finally:
        if engine is not None:
            engine.close()
        del engine
        free_memory(collect=row["status"] != "ok")
    return row


def quant_columns(engine) -> dict:
    """8-bit engines (fp8, int8 without TensorRT): ``quant_convs`` (convolutions quantised),
    ``quant_fallbacks`` (of those, how many cuDNN declined: they ran in fp16) and for int8
    ``quant_handoffs`` (how many hand their output over in int8), and on a GPU
    ``quant_plans_cached`` (how many cuDNN graphs took their tuned plan from the disk cache,
    :mod:`yolo_sm.core.engines.plan_cache`); empty otherwise."""
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
    """What the host decided of a timed point, from a short profiler pass after its timed calls
    (:func:`yolo_sm.core.timing.host_profile`): ``launches_per_forward``,
    ``kernels_per_forward``, ``gpu_busy_ms``, ``gpu_busy_fraction`` (= gpu_busy_ms / median_ms),
    ``host_launch_us`` (:func:`yolo_sm.core.timing.launch_cost_us`, measured right after)
    and ``host_bound`` (:func:`yolo_sm.analyse.hostbound.host_bound_rule`; False on a CPU, where
    the host is the device; None when the profiler pass failed)."""
    import math

    try:
        h = host_profile(engine_call(engine), device=engine.config.device)
        h["host_launch_us"] = launch_cost_us(engine.config.device)
    except Exception:  # noqa: BLE001 - no profiler (e.g. CUPTI busy): the figures are unknown
        nan = math.nan
        return {
            "launches_per_forward": nan,
            "kernels_per_forward": nan,
            "gpu_busy_ms": nan,
            "host_launch_us": nan,
            "gpu_busy_fraction": nan,
            "host_bound": None,
        }
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


def _row_tail(spec: SweepSpec, flops_per_img=None, p: Point | None = None) -> dict:
    """What every row of a point carries after its key, status and message."""

    return {
        "model": p.model if p else "",
        "flops_per_img": flops_per_img,
        "bn_calibrated": not p
        or not p.model
        or weights_calibrated(parse_model(p.model, need_shape=False)),
        "check_input": CHECK_INPUT if spec.check else "off",
    }


def _error_row(p: Point, spec: SweepSpec, e: BaseException, flops_per_img=None) -> dict:
    row = {**_coords(p), **failure(e), **_row_tail(spec, flops_per_img, p)}
    # every column of the schema, empty: a table of error rows alone is still a sweep table
    return {**dict.fromkeys(REQUIRED["sweep"]), **row}


def all_failed(df) -> str | None:
    """The sentence for a sweep table none of whose points was timed: the commonest reason,
    and the flag that relaxes a failed numerical check; None when a point was timed."""
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


def _coords(p: Point) -> dict:
    """A row's leading columns: the point's key (its model spec goes with the tail)."""
    return {k: v for k, v in asdict(p).items() if k != "model"}


def is_oom(e: BaseException) -> bool:
    import torch

    if isinstance(e, (torch.OutOfMemoryError, MemoryError)):  # MemoryError: a CPU's host RAM
        return True
    text = str(e).lower()
    return "out of memory" in text or "alloc_failed" in text

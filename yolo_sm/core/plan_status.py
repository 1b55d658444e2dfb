"""What a collection plan has left: each step's state (done, partial, changed, unregistered,
missing), what a partial one lacks, and the seconds a step needs before it starts (for
``collect --max-minutes``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from yolo_sm.contract.datasets import PARTIAL_PREFIX
from yolo_sm.contract.manifest import entry_problem
from yolo_sm.contract.plans import RESUMABLE, SCHEDULING_PARAMS, Plan, Step
from yolo_sm.core.bench import missing_units
from yolo_sm.core.plan_runners import (
    bench_spec,
    model_params,
    step_path,
    step_spec,
    sweep_spec,
    trace_spec,
)
from yolo_sm.core.profiling import trace_units
from yolo_sm.core.sweep import missing_points
from yolo_sm.topics.deploy.collect import missing_seconds as cache_missing_seconds
from yolo_sm.topics.deploy.collect import missing_units as cache_missing_units
from yolo_sm.topics.precision.collect import missing_seconds as int8_missing_seconds
from yolo_sm.topics.precision.collect import missing_units as int8_missing_units


def _progress(step: Step, plan: Plan, path: Path) -> tuple[int, int, str] | None:
    """(missing, total, what) of a step that measures in
    units: points of a sweep, (model, batch) units of a bench, (width, scope) units of an
    int8_kernels step, the (width, mode) units of a compile_cache step and the configs of a
    trace step (these three start only when their missing units fit: :func:`_partial_need`);
    None for the kinds that run whole."""
    if step.kind == "sweep":
        spec = sweep_spec(step, plan)
        return len(missing_points(spec, path)), len(spec.points()), "points"
    if step.kind == "bench":
        spec = bench_spec(step, plan)
        return len(missing_units(spec, path)), len(spec.units()), "(model, batch) units"
    if step.kind == "int8_kernels":
        spec = step_spec(step, plan)
        return len(int8_missing_units(spec, path)), len(spec.units()), "(width, scope) units"
    if step.kind == "compile_cache":
        spec = step_spec(step, plan)
        return len(cache_missing_units(spec, path)), len(spec.units()), "(width, mode) units"
    if step.kind == "trace":
        spec = trace_spec(step, plan)
        return len(trace_units.missing_units(spec, path)), len(spec.units()), "configs"
    return None


def step_state(step: Step, plan: Plan, out_dir: Path) -> str:
    """``done``, ``partial`` (a sweep with points missing, a bench with (model, batch) pairs
    missing), ``changed`` (a step that runs whole, whose table the manifest says was made with
    other params than the plan's now: the plan was edited), ``unregistered`` (its table is
    complete but the manifest lacks its entry, or holds a wrong one: ``collect`` registers it
    again from the table, measuring nothing) or ``missing``. A step is done only when its
    manifest entry exists."""
    return _state_and_progress(step, plan, out_dir)[0]


def _state_and_progress(step: Step, plan: Plan, out_dir: Path):
    """:func:`step_state` and, for a sweep or bench whose table exists, ``_progress``'s
    (missing, total, what) from the same reading of the table (else None)."""
    path = step_path(step, out_dir)
    if not path.exists():
        return "missing", None
    progress = _progress(step, plan, path)
    if progress and progress[0]:
        return "partial", progress
    if step.kind not in RESUMABLE:  # a sweep's or bench's params are its points: not compared
        made_with = _manifest_params(out_dir, step.name)
        if made_with is not None and _canonical(made_with) != _canonical(model_params(step, plan)):
            return "changed", progress
    if entry_problem(out_dir, step.name, step.out, step.dataset_kind):
        return "unregistered", progress
    return "done", progress


def _canonical(params) -> str:
    """The params that make a table, as text to compare: without :data:`SCHEDULING_PARAMS`."""
    kept = {k: v for k, v in params.items() if k not in SCHEDULING_PARAMS}
    return json.dumps(kept, sort_keys=True, default=str)


def _manifest_params(out_dir: Path, name: str):
    """The params the manifest in ``out_dir`` records for dataset ``name`` (None: not
    recorded, as in tables registered before collect recorded them)."""
    mf = out_dir / "manifest.json"
    try:
        return json.loads(mf.read_text())["datasets"][name].get("params")
    except (OSError, ValueError, KeyError):
        return None


def progress_note(step: Step, plan: Plan, out_dir: Path) -> str:
    """For a partial sweep or bench: ``"PARTIAL (n of N points): "`` (units for a bench), the
    prefix of its manifest description; ``""`` otherwise."""
    path = step_path(step, out_dir)
    progress = _progress(step, plan, path) if path.exists() else None
    if not progress or not progress[0]:
        return ""
    left, total, what = progress
    return f"{PARTIAL_PREFIX}{total - left} of {total} {what}; the same command resumes it): "


def status(plan: Plan, out_dir: str | os.PathLike):
    """One row per plan step: its ``state`` (:func:`step_state`), what is left of a step that
    measures in units (``todo``, e.g. ``70 of 192 points``; empty when nothing is) and the
    ``rows`` its table holds (empty without a table)."""
    import pandas as pd
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    rows = []
    for s in plan.steps:
        state, progress = _state_and_progress(s, plan, out_dir)
        path = step_path(s, out_dir)
        if progress is None and not path.exists():  # every unit is left
            progress = _progress(s, plan, path)
        todo = f"{progress[0]} of {progress[1]} {progress[2]}" if progress and progress[0] else ""
        try:
            n = pq.read_metadata(path).num_rows if path.exists() else None
        except Exception:  # noqa: BLE001 - an unreadable table: collect says why when it reads it
            n = None
        rows.append({"step": s.name, "kind": s.kind, "state": state, "todo": todo, "rows": n})
    out = pd.DataFrame(rows)
    return out.astype({"rows": "Int64"}) if len(out) else out


def need_s(step: Step, plan: Plan, out_dir: Path, state: str) -> float:
    """The seconds a step needs before it starts: its ``est_s``, or for a partial one (a
    table holding some of its units) what its missing units need (:func:`_partial_need`).
    collect waits for it to fit in the time left only for the kinds that do not stop at a
    deadline themselves (``contract.plans.TO_DEADLINE``)."""
    if state == "partial":
        return _partial_need(step, plan, step_path(step, out_dir))
    return step.est_s


def _partial_need(step: Step, plan: Plan, path: Path) -> float:
    """Seconds the missing units of a partial whole-unit step need: an int8_kernels,
    compile_cache or trace step's estimate from the units its table holds (a compile mode not
    built yet by the plan's ``mode_est_s``), else the missing units' share of its ``est_s``."""
    seconds = None
    if step.kind == "int8_kernels":
        seconds = int8_missing_seconds(step_spec(step, plan), path)
    elif step.kind == "compile_cache":
        seconds = cache_missing_seconds(step_spec(step, plan), path)[0]
    elif step.kind == "trace":
        seconds = trace_units.missing_seconds(trace_spec(step, plan), path)
    if seconds is not None:
        return seconds
    progress = _progress(step, plan, path)
    if progress and progress[1]:
        return step.est_s * progress[0] / progress[1]
    return step.est_s

"""What a collection plan has left: each step's state, what a partial one lacks and the seconds
a step needs before it starts (``collect --max-minutes``)."""

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
    """(missing, total, what) of a step that measures in units; None for the kinds run whole."""
    kinds = {
        "sweep": (sweep_spec, missing_points, "points"),
        "bench": (bench_spec, missing_units, "(model, batch) units"),
        "int8_kernels": (step_spec, int8_missing_units, "(width, scope) units"),
        "compile_cache": (step_spec, cache_missing_units, "(width, mode) units"),
        "trace": (trace_spec, trace_units.missing_units, "configs"),
    }
    if step.kind not in kinds:
        return None
    make, missing, what = kinds[step.kind]
    spec = make(step, plan)
    total = spec.points() if step.kind == "sweep" else spec.units()
    return len(missing(spec, path)), len(total), what


def step_state(step: Step, plan: Plan, out_dir: Path) -> str:
    """``done``, ``partial`` (units missing), ``changed`` (a whole step made with other params
    than the plan's now), ``unregistered`` (complete, its manifest entry missing or wrong) or
    ``missing``."""
    return _state_and_progress(step, plan, out_dir)[0]


def _state_and_progress(step: Step, plan: Plan, out_dir: Path):
    """:func:`step_state` and ``_progress`` of an existing table, from one reading of it."""
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
    """The params that make a table (not :data:`SCHEDULING_PARAMS`), as text to compare."""
    kept = {k: v for k, v in params.items() if k not in SCHEDULING_PARAMS}
    return json.dumps(kept, sort_keys=True, default=str)


def _manifest_params(out_dir: Path, name: str):
    """The params ``out_dir``'s manifest records for dataset ``name`` (None: not recorded)."""
    mf = out_dir / "manifest.json"
    try:
        return json.loads(mf.read_text())["datasets"][name].get("params")
    except (OSError, ValueError, KeyError):
        return None


def progress_note(step: Step, plan: Plan, out_dir: Path) -> str:
    """``"PARTIAL (n of N points ...): "`` of a partial step's description; ``""`` otherwise."""
    path = step_path(step, out_dir)
    progress = _progress(step, plan, path) if path.exists() else None
    if not progress or not progress[0]:
        return ""
    left, total, what = progress
    return f"{PARTIAL_PREFIX}{total - left} of {total} {what}; the same command resumes it): "


def status(plan: Plan, out_dir: str | os.PathLike):
    """One row per plan step: ``state``, ``todo`` (e.g. ``70 of 192 points``) and ``rows``."""
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
    """The seconds a step needs before it starts: its ``est_s``; for a partial one, its missing
    units' estimate (int8_kernels, compile_cache, trace) or share of ``est_s``."""
    if state != "partial":
        return step.est_s
    path, seconds = step_path(step, out_dir), None
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

"""Collection plans: named steps run into ``data/<machine>/``, each table registered; a rerun
resumes partial steps, and no work starts that would end past ``max_minutes``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from yolo_sm.contract.datasets import PARTIAL_PREFIX
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.manifest import entry_problem, root_gpus
from yolo_sm.contract.manifest import register as reg
from yolo_sm.contract.plans import RESUMABLE, SCHEDULING_PARAMS, TO_DEADLINE, Plan, Step
from yolo_sm.contract.store import output_lock, read_arrow, read_table, write_table_atomic
from yolo_sm.core import provenance
from yolo_sm.core.bench import missing_units
from yolo_sm.core.plan_runners import (
    RUNNERS,
    bench_spec,
    model_params,
    registration_command,
    step_path,
    step_spec,
    sweep_spec,
    trace_spec,
)
from yolo_sm.core.profiling import trace_units
from yolo_sm.core.sweep import all_failed, missing_points
from yolo_sm.topics.deploy.collect import missing_seconds as cache_missing_seconds
from yolo_sm.topics.deploy.collect import missing_units as cache_missing_units
from yolo_sm.topics.precision.collect import missing_seconds as int8_missing_seconds
from yolo_sm.topics.precision.collect import missing_units as int8_missing_units


def check_gpu_model(out_dir: str | os.PathLike, device: str, name: str | None = None) -> None:
    """Stop before measuring on another GPU model than ``out_dir``'s tables (a folder holds one
    GPU model's rows: :func:`provenance.gpu_clash`); ``name``: the GPU as a worker read it."""
    name = name or provenance.gpu_name(device)
    known = root_gpus(out_dir) if Path(out_dir).is_dir() else []
    here = provenance.gpu_clash(known, device, name)
    if here:
        raise UserError(
            f"{out_dir} holds tables measured on {', '.join(known)} and {here}: "
            "collect into another folder, one per GPU model"
        )


def redo_errors(step: Step, out_dir: Path, match: str = "") -> int:
    """Drop a sweep or bench table's ``error`` rows (not ``oom``) whose message contains
    ``match``, so the step measures them again; returns how many were dropped."""
    import pyarrow.compute as pc

    path = step_path(step, out_dir)
    if step.kind not in RESUMABLE or not path.exists():
        return 0
    table = read_arrow(path)  # an unreadable file: one clear error, the file left alone
    if "status" not in table.column_names:
        return 0
    drop = pc.equal(table["status"], "error")
    if match:
        msg = pc.fill_null(table["message"], "")
        drop = pc.and_(drop, pc.match_substring(msg, match))
    drop = pc.fill_null(drop, False)
    n = int(pc.sum(drop).as_py() or 0)
    if n:
        write_table_atomic(table.filter(pc.invert(drop)), path)
    return n


def check_only(plan: Plan, only) -> None:
    """One sentence where ``only`` names a step the plan lacks."""
    names = {s.name for s in plan.steps}
    for o in only or []:
        if o not in names:
            raise UserError(
                f"plan {plan.name} has no step {o!r}; steps: {', '.join(sorted(names))}"
            )


def run_plan(
    plan: Plan,
    out_dir: str | os.PathLike,
    only: list[str] | None = None,
    max_minutes: float | None = None,
    progress: bool = True,
    register: bool = True,
    redo: str | None = None,
):
    """Run the plan's unfinished steps (those in ``only``) into ``out_dir``; the status after.
    ``redo``: a message substring whose error rows are measured again (:func:`redo_errors`)."""
    out_dir = Path(out_dir)
    check_only(plan, only)
    for step in plan.steps:
        step_path(step, out_dir)  # every out inside the folder, before any work
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {out_dir}: {e.strerror or e}") from None
    deadline = time.monotonic() + 60 * max_minutes if max_minutes else None
    with output_lock(out_dir):
        chosen = [s for s in plan.steps if not only or s.name in only]
        if redo is not None or any(
            step_state(s, plan, out_dir) not in ("done", "unregistered") for s in chosen
        ):
            check_gpu_model(out_dir, plan.device)
        for step in chosen:
            _run_step(step, plan, out_dir, deadline, progress, register, redo)
    return status(plan, out_dir)


#: step kinds that read a GPU's own counters: a plan run on a CPU skips them, saying so
GPU_ONLY = ("ncu", "gpm", "monitor")


def register_step(step: Step, plan: Plan, out_dir: Path) -> dict:
    text = progress_note(step, plan, out_dir) + step.description
    command, params = registration_command(plan, out_dir, step), model_params(step, plan)
    return reg(out_dir, step.name, step.out, step.dataset_kind, text, command, params=params)


def say(text: str) -> None:
    """One line of ``collect``'s progress on stderr."""
    print(f"collect: {text}", file=sys.stderr, flush=True)


def _run_step(step, plan, out_dir, deadline, progress, register, redo) -> None:
    n = redo_errors(step, out_dir, redo) if redo is not None else 0
    if n:
        say(f"{step.name}: {n} error row(s) to measure again")
    state, path = step_state(step, plan, out_dir), step_path(step, out_dir)
    if state == "done":
        return
    if state == "unregistered":
        if register:  # the table is complete: its entry is rebuilt, nothing is measured
            say(f"{step.name}: registered again from its table")
            register_step(step, plan, out_dir)
        return
    if step.kind in GPU_ONLY and not plan.device.startswith("cuda"):
        say(
            f"{step.name} skipped: a {step.kind} step reads a GPU's counters and this plan runs "
            f"on {plan.device}"
        )
        return
    left = deadline - time.monotonic() if deadline else None
    need = None
    if left is not None and left > 0 and step.kind not in TO_DEADLINE:
        need = need_s(step, plan, out_dir, state)
    if left is not None and (left <= 0 or (need is not None and need > left)):
        wants = f"needs about {need:.0f} s and " if need is not None else ""
        say(
            f"{step.name} {wants}does not fit in the time left ({left:.0f} s); run the command "
            "again with that much time"
        )
        return
    say(f"{step.name} ({step.kind}, {state})")
    try:
        RUNNERS[step.kind](step, plan, out_dir, deadline, progress)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli.main): keep what was measured
        if register and step.kind in TO_DEADLINE and path.exists():
            try:  # registered so that a rerun resumes it
                register_step(step, plan, out_dir)
                say(
                    f"{step.name}: interrupted; its table is registered as measured so far (the "
                    "same command resumes it)"
                )
            except (UserError, OSError) as e:
                say(f"{step.name}: interrupted and not registered: {e}")
        raise
    if register and path.exists():
        register_step(step, plan, out_dir)
    if step.kind == "sweep" and path.exists():
        failed = all_failed(read_table(path))
        if failed:  # registered, then one sentence: the rows are kept
            raise UserError(f"plan step {step.name}: {failed}")


#: kind -> (its spec of a step, the units a table lacks, their seconds or None, what they are)
UNITS = {
    "sweep": (sweep_spec, missing_points, None, "points"),
    "bench": (bench_spec, missing_units, None, "(model, batch) units"),
    "int8_kernels": (step_spec, int8_missing_units, int8_missing_seconds, "(width, scope) units"),
    "compile_cache": (step_spec, cache_missing_units, cache_missing_seconds, "(width, mode) units"),
    "trace": (trace_spec, trace_units.missing_units, trace_units.missing_seconds, "configs"),
}


def _progress(step: Step, plan: Plan, path: Path) -> tuple[int, int, str] | None:
    """(missing, total, what) of a step that measures in units; None for the kinds run whole."""
    if step.kind not in UNITS:
        return None
    make, missing, _, what = UNITS[step.kind]
    spec = make(step, plan)
    total = spec.points() if step.kind == "sweep" else spec.units()
    return len(missing(spec, path)), len(total), what


def step_state(step: Step, plan: Plan, out_dir: Path) -> str:
    """``done``, ``partial`` (units missing), ``changed`` (made with other params),
    ``unregistered`` (manifest entry missing or wrong) or ``missing``."""
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
    path = step_path(step, out_dir)
    make, _, missing_s, _ = UNITS.get(step.kind, (None,) * 4)
    seconds = missing_s(make(step, plan), path) if missing_s else None
    if seconds is not None:
        return seconds
    progress = _progress(step, plan, path)
    if progress and progress[1]:
        return step.est_s * progress[0] / progress[1]
    return step.est_s

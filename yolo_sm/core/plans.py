"""Collection plans: a named list of steps run into ``data/<machine>/``, each table registered.
A rerun skips done steps and resumes partial ones unit by unit; with ``max_minutes`` no work
starts that would end past the limit. Runners: :mod:`.plan_runners`; what is left:
:mod:`.plan_status`."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.manifest import register as reg
from yolo_sm.contract.manifest import root_gpus
from yolo_sm.contract.plans import RESUMABLE, TO_DEADLINE, Plan, Step
from yolo_sm.contract.store import (
    output_lock,
    read_arrow,
    read_table,
    write_table_atomic,
)
from yolo_sm.core import provenance
from yolo_sm.core.plan_runners import RUNNERS, model_params, registration_command, step_path
from yolo_sm.core.plan_status import need_s, progress_note, status, step_state
from yolo_sm.core.sweep import all_failed


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
    return reg(
        out_dir,
        step.name,
        step.out,
        step.dataset_kind,
        progress_note(step, plan, out_dir) + step.description,
        registration_command(plan, out_dir, step),
        params=model_params(step, plan),
    )


def _run_step(step, plan, out_dir, deadline, progress, register, redo) -> None:
    if redo is not None:
        n = redo_errors(step, out_dir, redo)
        if n:
            print(f"collect: {step.name}: {n} error row(s) to measure again", file=sys.stderr)
    state = step_state(step, plan, out_dir)
    if state == "done":
        return
    if state == "unregistered":
        if register:  # the table is complete: its entry is rebuilt, nothing is measured
            print(f"collect: {step.name}: registered again from its table", file=sys.stderr)
            register_step(step, plan, out_dir)
        return
    if step.kind in GPU_ONLY and not plan.device.startswith("cuda"):
        print(
            f"collect: {step.name} skipped: a {step.kind} step reads a GPU's counters and this "
            f"plan runs on {plan.device}",
            file=sys.stderr,
        )
        return
    left = deadline - time.monotonic() if deadline else None
    need = (
        need_s(step, plan, out_dir, state)
        if left is not None and left > 0 and step.kind not in TO_DEADLINE
        else None
    )
    if left is not None and (left <= 0 or (need is not None and need > left)):
        wants = f"needs about {need:.0f} s and " if need is not None else ""
        print(
            f"collect: {step.name} {wants}does not fit in the time left ({left:.0f} s); "
            "run the command again with that much time",
            file=sys.stderr,
        )
        return
    print(f"collect: {step.name} ({step.kind}, {state})", file=sys.stderr, flush=True)
    try:
        RUNNERS[step.kind](step, plan, out_dir, deadline, progress)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli.main): keep what was measured
        if register and step.kind in TO_DEADLINE and step_path(step, out_dir).exists():
            _register_interrupted(step, plan, out_dir)
        raise
    if register and step_path(step, out_dir).exists():
        register_step(step, plan, out_dir)
    if step.kind == "sweep" and step_path(step, out_dir).exists():
        failed = all_failed(read_table(step_path(step, out_dir)))
        if failed:  # registered, then one sentence: the rows are kept
            raise UserError(f"plan step {step.name}: {failed}")


def _register_interrupted(step: Step, plan: Plan, out_dir: Path) -> None:
    """Register a TO_DEADLINE step stopped part-way so a rerun resumes it (errors: a warning)."""
    try:
        register_step(step, plan, out_dir)
        print(
            f"collect: {step.name}: interrupted; its table is registered as measured so far "
            "(the same command resumes it)",
            file=sys.stderr,
        )
    except (UserError, OSError) as e:
        print(f"collect: {step.name}: interrupted and not registered: {e}", file=sys.stderr)

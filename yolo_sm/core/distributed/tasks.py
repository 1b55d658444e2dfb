"""The task log of a collection run on a Dask cluster: one row per task (its unit, state, wall
seconds and where it ran) with the run's own wall time and worker count, appended to the root's
``collect_tasks`` table after every run, so that a plan resumed over several runs keeps them
all. What it answers: how long a plan took on N GPUs against one (the wall time of each run,
not the GPU seconds the steps record), and which GPU measured which unit."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from yolo_sm.contract.manifest import register
from yolo_sm.contract.schema import COLLECT_TASKS, PLACE_COLUMNS
from yolo_sm.contract.store import read_table, write_atomic

FILE = f"{COLLECT_TASKS}.parquet"
DESCRIPTION = (
    "The tasks of the collect runs on a Dask cluster that wrote this root: per task, its plan "
    "step and unit, its state and wall seconds, and the GPU, host and worker it ran on; per "
    "run, its wall seconds and its number of workers (one GPU each)."
)
#: the state of a task that raised (the others: what the unit's run returned)
ERROR = "error"


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def task_row(unit, result: dict | None) -> dict:
    """One task's row: ``result`` is what the task returned
    (:func:`yolo_sm.core.distributed.run_task`), None for a task that raised."""
    row = {"step": unit.step.name, "unit": unit.name}
    if result is None:
        return {**row, "state": ERROR, "seconds": float("nan")}
    row.update(state=result["state"], seconds=float(result["seconds"]), cores=result.get("cores"))
    row.update({c: result.get(c) for c in PLACE_COLUMNS})
    return row


def save_run(
    out_dir: str | Path,
    rows: list[dict],
    *,
    run: str,
    started_utc: str,
    wall_s: float,
    workers: int,
    command: str,
) -> pd.DataFrame:
    """Append one run's task rows (:func:`task_row`) to ``out_dir``'s task log, written
    atomically and registered in the manifest (``command``: how the run was started); returns
    the whole log. Nothing is written for a run without tasks."""
    path = Path(out_dir) / FILE
    before = read_table(path)
    if not rows:
        return before
    head = {"run": run, "run_started_utc": started_utc, "run_wall_s": float(wall_s)}
    new = pd.DataFrame([{**head, "workers": int(workers), **r} for r in rows])
    log = pd.concat([before, new], ignore_index=True) if len(before) else new
    write_atomic(log, path)
    register(out_dir, COLLECT_TASKS, FILE, COLLECT_TASKS, DESCRIPTION, command)
    return log

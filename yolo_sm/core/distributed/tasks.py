"""The task log of collection runs on a Dask cluster (the root's ``collect_tasks`` table): per
task its unit, state, wall seconds and place; per run its wall time and worker count."""

from __future__ import annotations

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


def task_row(unit, result: dict | None) -> dict:
    """One task's row from what ``run_task`` returned (None: it raised)."""
    row = {"step": unit.step.name, "unit": unit.name}
    if result is None:
        return {**row, "state": ERROR, "seconds": float("nan")}
    row.update(state=result["state"], seconds=float(result["seconds"]), cores=result.get("cores"))
    row.update({c: result.get(c) for c in PLACE_COLUMNS})
    return row


def save_run(out_dir: Path, rows: list[dict], run: dict, command: str) -> None:
    """Append one run's task rows, each led by ``run``'s columns (run, run_started_utc,
    run_wall_s in s, workers), to ``out_dir``'s task log and register it."""
    path = Path(out_dir) / FILE
    before = read_table(path)
    new = pd.DataFrame([{**run, **r} for r in rows])
    log = pd.concat([before, new], ignore_index=True) if len(before) else new
    write_atomic(log, path)
    register(out_dir, COLLECT_TASKS, FILE, COLLECT_TASKS, DESCRIPTION, command)

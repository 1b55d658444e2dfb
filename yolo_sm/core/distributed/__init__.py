"""A collection plan run on a Dask cluster (docs/distributed.md): one task per unit (:mod:`.units`)
asking for one GPU, its shard merged as soon as it ends (or by the next run, if the driver died);
the root's ``collect_tasks`` table logs each task's unit, state, seconds and place."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
import uuid
from pathlib import Path

import pandas as pd

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.manifest import register
from yolo_sm.contract.plans import Plan
from yolo_sm.contract.schema import COLLECT_TASKS, PLACE_COLUMNS
from yolo_sm.contract.store import read_table, write_atomic
from yolo_sm.core import plans, provenance
from yolo_sm.core.distributed.cluster import (
    RESOURCE,
    client_for,
    pin_threads,
    place,
    require_distributed,
)
from yolo_sm.core.distributed.units import (
    Unit,
    merge_unit,
    plan_units,
    run_unit_into_shard,
    seed_shard,
)

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


def run_task(unit: Unit, plan: Plan, out_dir: str, stop_at: float | None = None) -> dict:
    """A worker's task: ``unit`` run into its shard; its state, seconds, cores and place.
    ``stop_at``: a ``time.time()`` after which no new point starts."""
    plans.check_gpu_model(out_dir, plan.device)
    cores = pin_threads()
    where = place(plan.device)
    deadline = time.monotonic() + (stop_at - time.time()) if stop_at is not None else None
    t0 = time.perf_counter()
    state = run_unit_into_shard(unit, plan, Path(out_dir), where, deadline)
    return {"state": state, "seconds": time.perf_counter() - t0, "cores": len(cores), **where}


def check_cluster_gpus(client, out_dir: Path, device: str) -> None:
    """Stop where the workers hold GPUs of several models, or of another model than
    ``out_dir``'s tables (a root holds one GPU model's rows)."""
    names = client.run(provenance.gpu_name, device)
    models = sorted({n for n in names.values() if n})
    if len(models) > 1:
        raise UserError(
            f"the cluster's workers hold GPUs of {len(models)} models ({', '.join(models)}) and "
            "a folder holds one model's rows: run one cluster per GPU model, each into a "
            "folder of its own (CUDA_VISIBLE_DEVICES chooses a host's GPUs)"
        )
    if models:
        plans.check_gpu_model(out_dir, device, models[0])


def _command(plan: Plan, out_dir: Path, tail: str) -> str:
    return f"yolo-sm collect --plan {plan.path or plan.name} --out {out_dir} {tail}".rstrip()


def run_plan(
    plan: Plan,
    out_dir,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    only: list[str] | None = None,
    max_minutes: float | None = None,
    progress: bool = True,
    redo: str | None = None,
    client=None,
):
    """:func:`yolo_sm.core.plans.run_plan` on a local cluster of ``workers``, the scheduler at
    ``scheduler`` or ``client``'s; a task's error is raised once every task has been merged."""
    distributed = require_distributed()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plans.check_only(plan, only)
    steps = {s.name: s for s in plan.steps}
    units = plan_units(plan, only)

    def merge(u: Unit) -> bool:
        step = steps[u.step.name]
        return merge_unit(
            u, plan, out_dir, step, command=_command(plan, out_dir, f"--only {step.name}")
        )

    left_behind = [u for u in units if merge(u)]
    if left_behind and progress:
        plans.say(f"merged {len(left_behind)} shard(s) of an earlier run")
    if redo is not None:
        for name in dict.fromkeys(u.step.name for u in units):
            n = plans.redo_errors(steps[name], out_dir, redo)
            if n and progress:
                plans.say(f"{name}: {n} error row(s) to measure again")
    todo = [u for u in units if plans.step_state(u.step, plan, out_dir) != "done"]
    if not todo:
        return plans.status(plan, out_dir)
    plans.check_gpu_model(out_dir, plan.device)  # on the driver too, where it sees the GPUs
    stop_at = time.time() + 60 * max_minutes if max_minutes else None
    errors, rows = [], []
    if client is None:
        client = client_for(workers, scheduler, plan.device)
    else:
        client = contextlib.nullcontext(client)
    with client as c:
        check_cluster_gpus(c, out_dir, plan.device)  # before a shard is written
        for u in todo:
            seed_shard(u, plan, out_dir)
        token = uuid.uuid4().hex[:8]
        run = {"run": token, "run_started_utc": dt.datetime.now(dt.UTC).isoformat("T", "seconds")}
        workers_now = len(c.scheduler_info().get("workers", {}))
        t0 = time.perf_counter()
        futures = {
            c.submit(
                run_task,
                u,
                plan,
                str(out_dir),
                stop_at,
                key=f"yolo-sm-{token}-{u.order}-{u.name}",
                resources={RESOURCE: 1},
                priority=-u.order,
                pure=False,
            ): u
            for u in todo
        }
        for fut in distributed.as_completed(list(futures)):
            u = futures[fut]
            r = None if fut.status == "error" else fut.result()
            rows.append(task_row(u, r))
            if r is None:
                errors.append(fut.exception())
                msg = f"{u.name} failed: {errors[-1]}"
            else:
                where = r["host"] + (f", {r['gpu_uuid']}" if r.get("gpu_uuid") else "")
                msg = f"{u.name} {r['state']} on {r['worker']} ({where}) in {r['seconds']:.0f} s"
            if progress:
                plans.say(msg)
            merge(u)
        on = f"--workers {workers}" if workers else f"--scheduler {scheduler}" if scheduler else ""
        run.update(run_wall_s=time.perf_counter() - t0, workers=workers_now)
        save_run(out_dir, rows, run, _command(plan, out_dir, on))
    if errors:
        raise errors[0]
    return plans.status(plan, out_dir)

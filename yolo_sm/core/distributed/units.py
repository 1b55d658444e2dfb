"""A plan cut into units (one model of a sweep or bench step, else a whole step), each run into
``<out>/.shards/<step>/<label>/``, its rows tagged with their place, and merged back."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from yolo_sm.contract.manifest import register
from yolo_sm.contract.plans import RESUMABLE, TO_DEADLINE, Plan, Step
from yolo_sm.contract.schema import KEY_COLUMNS, PLACE_COLUMNS
from yolo_sm.contract.scrub import user_argv
from yolo_sm.contract.store import (
    copy_atomic,
    read_arrow,
    read_table,
    write_atomic,
    write_text_atomic,
)
from yolo_sm.core import plan_runners, plans
from yolo_sm.core.bench import UNIT

SHARDS = ".shards"  # folder of the shards inside a dataset root
OWNER = "owner.json"  # the place of the worker running a shard
SEEDED = {"worker": ""}  # the place of rows seeded from outside any worker
#: the columns that name a unit's rows, by step kind
ROW_KEYS = {"sweep": KEY_COLUMNS, "bench": UNIT}


@dataclass(frozen=True)
class Unit:
    """One task: its ``step`` (restricted to one model for a sweep or bench), shard ``label``
    and ``order`` in the plan (the scheduler's priority)."""

    step: Step
    label: str
    order: int

    @property
    def name(self) -> str:
        return f"{self.step.name}/{self.label}"


def _label(*parts) -> str:
    text = "-".join("none" if p is None else str(p) for p in parts)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def full_spec(step: Step, plan: Plan):
    """The SweepSpec or BenchSpec of a sweep or bench step (None for the other kinds)."""
    spec = {"sweep": plan_runners.sweep_spec, "bench": plan_runners.bench_spec}.get(step.kind)
    return spec and spec(step, plan)


def step_units(step: Step, plan: Plan) -> list[tuple[Step, str]]:
    """(part, shard label) of the step cut by model: per (family, width, depth) with points of a
    sweep, per (family, width) of a bench; the other kinds whole."""
    if step.kind == "sweep":
        spec = full_spec(step, plan)
        out, seen = [], set()
        for fam, w, d in itertools.product(spec.family, spec.widths, spec.depth):
            params = {**step.params, "family": [fam], "widths": [w], "depth": [d]}
            keys = tuple(p.key() for p in full_spec(replace(step, params=params), plan).points())
            if keys and keys not in seen:
                seen.add(keys)
                out.append((replace(step, params=params), _label(fam, f"w{w}", f"d{d}")))
        return out
    if step.kind == "bench":
        spec = full_spec(step, plan)
        rest = {k: v for k, v in step.params.items() if k not in ("models", "family", "widths")}
        models = [f"{f}:{w}" for f, w in spec.models]
        return [
            (replace(step, params={**rest, "models": [m]}), _label(m.replace(":", "-w")))
            for m in models
        ]
    return [(step, "whole")]


def plan_units(plan: Plan, only: list[str] | None = None) -> list[Unit]:
    """Every unit of the plan's steps (those named in ``only``), in plan order."""
    parts = [
        p for step in plan.steps if not only or step.name in only for p in step_units(step, plan)
    ]
    return [Unit(s, label, i) for i, (s, label) in enumerate(parts)]


def shard_dir(out_dir: Path, unit: Unit) -> Path:
    return Path(out_dir) / SHARDS / unit.step.name / unit.label


# --- places -------------------------------------------------------------------------------


def read_owner(shard: Path) -> dict | None:
    try:
        return json.loads((shard / OWNER).read_text())
    except (OSError, ValueError):
        return None


def write_owner(shard: Path, place: dict) -> None:
    write_text_atomic(shard / OWNER, json.dumps({**place, "pid": os.getpid()}))


def _yolo_sm_meta(table) -> dict | None:
    raw = (table.schema.metadata or {}).get(b"yolo_sm")
    return json.loads(raw) if raw else None


def tag_rows(path: Path, place: dict) -> None:
    """Fill the :data:`PLACE_COLUMNS` of ``path``'s rows without a ``worker`` from ``place``
    (``SEEDED``: rows copied from outside any worker)."""
    if not path.exists():
        return
    table = read_arrow(path)
    df = table.to_pandas()
    df = df.reindex(columns=[*df.columns, *(c for c in PLACE_COLUMNS if c not in df)])
    todo = df["worker"].isna()
    if todo.any():
        df = df.astype({c: object for c in PLACE_COLUMNS})
        for c, v in place.items():
            if c in PLACE_COLUMNS:
                df.loc[todo, c] = v
        write_atomic(df, path, _yolo_sm_meta(table))


def seed_shard(unit: Unit, plan: Plan, out_dir: Path) -> None:
    """Copy into a new shard the plan table's rows of the unit, so that it resumes after them."""
    step = unit.step
    main, mine = Path(out_dir) / step.out, shard_dir(out_dir, unit) / step.out
    if step.kind not in RESUMABLE or not main.exists() or mine.exists():
        return
    df = read_table(main)
    ours = _keys(df, ROW_KEYS[step.kind]).isin(set(_spec_keys(full_spec(step, plan), step.kind)))
    if not ours.any():
        return
    mine.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(df[ours].reset_index(drop=True), mine, _yolo_sm_meta(read_arrow(main)))
    tag_rows(mine, SEEDED)


def _unmark_seeded(df):
    """Rows seeded from outside any worker (an empty ``worker``) get no place back."""
    if "worker" in df:
        df["worker"] = df["worker"].where(df["worker"] != "", None)
    return df


def _keys(df, columns):
    """The rows' keys as one Series of tuples (bench widths rounded as the bench does)."""
    import pandas as pd

    parts = [df[c].round(6) if c == "width" else df[c] for c in columns]
    return pd.Series(list(zip(*parts, strict=True)), index=df.index)


def _spec_keys(spec, kind: str) -> list[tuple]:
    """The row keys of a sweep's points or a bench's units, in run order."""
    if kind == "sweep":
        return [p.key() for p in spec.points()]
    return [(str(f), round(float(w), 6), int(b)) for f, w, b in spec.units()]


# --- running a unit (on a worker) ------------------------------------------------------------


def run_unit_into_shard(
    unit: Unit, plan: Plan, out_dir: Path, place: dict, deadline: float | None = None
) -> str:
    """Run ``unit`` into its shard with the plan's runner: ``done``, ``partial`` (stopped by
    ``deadline``, a ``time.monotonic()``) or ``skipped`` (a whole step whose ``est_s`` does not
    fit). A whole TO_DEADLINE step resumes the plan's table, copied into the shard."""
    import time

    step = unit.step
    shard = shard_dir(out_dir, unit)
    shard.mkdir(parents=True, exist_ok=True)
    main, mine = Path(out_dir) / step.out, shard / step.out
    before = read_owner(shard)
    if before is not None:  # a killed worker's rows are its own
        tag_rows(mine, before)
    write_owner(shard, place)
    if step.kind in TO_DEADLINE and step.kind not in RESUMABLE:
        if main.exists() and not mine.exists():  # resumes the plan's table, rows of no worker
            copy_atomic(main, mine)
            tag_rows(mine, SEEDED)
    elif step.kind not in RESUMABLE:
        left = deadline - time.monotonic() if deadline is not None else None
        if left is not None and step.est_s > left:
            return "skipped"
        mine.unlink(missing_ok=True)  # a whole step runs whole
    plan_runners.RUNNERS[step.kind](step, plan, shard, deadline, False)
    tag_rows(mine, place)
    state = plans.step_state(step, plan, shard)
    # a shard's table is registered when the driver merges it: complete, it is done
    return "done" if state == "unregistered" else state


# --- merging (on the driver) -----------------------------------------------------------------


def merge_unit(unit: Unit, plan: Plan, out_dir: Path, step: Step, *, command: str) -> bool:
    """Merge the unit's shard into the plan's table of ``step`` (the whole step), register it and
    delete the shard (a whole step's only once written); returns whether anything was merged."""
    out_dir = Path(out_dir)
    shard = shard_dir(out_dir, unit)
    if not shard.exists():
        return False
    table = shard / step.out
    owner = read_owner(shard)
    if owner is not None:
        tag_rows(table, owner)  # rows of a killed worker that never tagged them
    if step.kind in RESUMABLE:
        if table.exists():
            _merge_rows(table, step, plan, out_dir)
    elif table.exists():
        if step.kind in TO_DEADLINE:  # a whole step that resumed the plan's table
            seeded = read_arrow(table)
            write_atomic(_unmark_seeded(seeded.to_pandas()), table, _yolo_sm_meta(seeded))
        for f in sorted(p for p in shard.rglob("*") if p.is_file() and p.name != OWNER):
            dest = out_dir / f.relative_to(shard)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, dest)
    else:
        return False
    if (out_dir / step.out).exists():
        note = plans.progress_note(step, plan, out_dir) + step.description
        register(out_dir, step.name, step.out, step.dataset_kind, note, command, params=step.params)
    shutil.rmtree(shard)
    folder = shard.parent
    while folder != out_dir and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()  # the empty shard folders above it
        folder = folder.parent
    return True


def _merge_rows(shard_table: Path, step: Step, plan: Plan, out_dir: Path) -> None:
    """The plan's table = its rows the shard lacks + the shard's, in the step's grid order."""
    import pandas as pd

    main = out_dir / step.out
    new = read_table(shard_table)
    old = read_table(main)
    keys = list(ROW_KEYS[step.kind])
    if len(old):
        old = old[~_keys(old, keys).isin(set(_keys(new, keys)))]
    df = pd.concat([old, new], ignore_index=True) if len(old) else new
    spec = full_spec(step, plan)
    order = {k: i for i, k in enumerate(_spec_keys(spec, step.kind))}
    pos = _keys(df, keys).map(lambda k: order.get(k, len(order)))
    df = _unmark_seeded(df.iloc[pos.argsort(kind="stable")].reset_index(drop=True))
    write_atomic(df, main, {"spec": asdict(spec), "argv": user_argv(sys.argv)})

"""The GPU time a collection plan costs, saved as a table of its dataset root
(``yolo-sm collect --status --save``): one row per plan step, the seconds its table took
(recorded per phase in the manifest for the rows it holds, else estimated from its rows), the
seconds recorded for work it no longer holds, the step's params as the plan names them, the
seconds it still needs
by :func:`yolo_sm.collect.plan_status.status`'s estimate, and their sum, the step's whole cost.

Saved, the table is a snapshot: it keeps what the root's tables said when it was taken, so a
later collection (a sample of every step, re-collected with faster code into another root)
can be compared with it (:mod:`yolo_sm.analyse.collection_time`). The analysis layer reads it
without the plan machinery, which needs the collect layer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from yolo_sm.analyse.collection_time import sample_cost
from yolo_sm.collect.bench import unit_group
from yolo_sm.collect.plan_runners import (
    bench_spec,
    cache_spec,
    int8_kernel_spec,
    model_params,
    sweep_spec,
    trace_spec,
)
from yolo_sm.collect.plan_status import status, step_record
from yolo_sm.collect.plans import SAMPLED_KINDS
from yolo_sm.contract.gpu_time import PHASES
from yolo_sm.contract.manifest import PROVENANCE_FIELDS, read_manifest, register
from yolo_sm.contract.plans import Plan
from yolo_sm.contract.schema import COLLECTION_TIME
from yolo_sm.contract.scrub import shown_path
from yolo_sm.contract.store import write_atomic

FILE = f"{COLLECTION_TIME}.parquet"
DESCRIPTION = (
    "The GPU seconds of every step of the plan that made this root, as its tables said when "
    "this snapshot was taken (collect --status --save): spent (recorded per phase in the "
    "manifest for the rows the table holds, else estimated from the rows), left (the estimate "
    "for what is not measured yet) and their sum per step, the recorded seconds of work "
    "the tables no longer hold, and each step's params as the plan names them."
)


def table(plan: Plan, out_dir: str | os.PathLike, st: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per step of ``plan`` over the root ``out_dir``: the columns of the
    ``collection_time`` schema (:data:`yolo_sm.contract.schema.SCHEMAS`); each row's
    provenance columns are those of the step's dataset (the machine and software stack its
    seconds were spent on, ``prov_date_utc`` its last measurement), empty for a step without
    a table. ``st``: :func:`yolo_sm.collect.plan_status.status` of the two, when the caller has it
    already."""
    out_dir = Path(out_dir)
    st = status(plan, out_dir) if st is None else st
    rows = []
    for s, r in zip(plan.steps, st.itertuples(index=False), strict=True):
        rec, gone = step_record(s, out_dir) if r.gpu_s_source == "recorded" else (None, 0.0)
        # a record's own total (status rounds it for display)
        spent = rec["total"] if rec else float(r.gpu_s) if pd.notna(r.gpu_s) else 0.0
        left = float(r.est_left_s or 0.0)
        row = {
            "step": s.name,
            "kind": s.kind,
            "state": r.state,
            "rows": r.rows,
            "spent_s": spent,
            "spent_source": r.gpu_s_source,
            "left_s": left,
            "left_source": r.est_source,
            "plan_s": spent + left,
            "groups": groups(s, plan),
            # what the plan asks of the step now: a table made before the plan changed is
            # held against it (a bench unit that lacks an engine the plan added since)
            "plan_params": _plan_params(s, plan),
        }
        for p in (*PHASES, "other"):
            row[f"{p}_s"] = rec[p] if rec else float("nan")
        row["runs"] = rec["runs"] if rec else float("nan")
        row["superseded_s"] = gone if rec else float("nan")
        rows.append(row)
    df = pd.DataFrame(rows).astype({"rows": "Int64", "groups": "Int64"})
    entries = read_manifest(out_dir, repair=True).get("datasets", {})
    for f in PROVENANCE_FIELDS:
        df[f"prov_{f}"] = [_text(_provenance(entries, s.name).get(f)) for s in plan.steps]
    df["prov_date_utc"] = [_provenance(entries, s.name).get("date_utc_last") for s in plan.steps]
    return df


def _plan_params(step, plan: Plan) -> str:
    """``step``'s params as the plan names them, as JSON text; a model given by an absolute
    path is shown as the user would type it from here (as recorded commands are), so a
    snapshot names no folder of this host."""
    params = model_params(step, plan)
    for key in ("models", "model"):
        v = params.get(key)
        if isinstance(v, str):
            params[key] = shown_path(v)
        elif isinstance(v, list):
            params[key] = [shown_path(x) if isinstance(x, str) else x for x in v]
    return json.dumps(params, sort_keys=True, default=str)


def _provenance(entries: dict, name: str) -> dict:
    """The provenance of dataset ``name``'s manifest entry (empty without one)."""
    return (entries.get(name) or {}).get("provenance") or {}


def _text(value):
    """A provenance value as one text (a list of several joined), None when absent."""
    if value is None or value == []:
        return None
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def save(
    plan: Plan,
    out_dir: str | os.PathLike,
    st: pd.DataFrame | None = None,
    command: str | None = None,
    snapshot: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Write :func:`table` into ``out_dir`` as ``collection_time.parquet`` (atomically) and
    register it in the root's manifest (``command``: the command recorded, by default the
    one that saves it as a user would type it, paths relative to the working folder); returns
    the table. ``snapshot``: that table, when the caller has made it already."""
    out_dir = Path(out_dir)
    df = table(plan, out_dir, st) if snapshot is None else snapshot
    if command is None:
        command = (
            f"yolo-sm collect --plan {shown_path(str(Path(plan.path or plan.name).absolute()))} "
            f"--out {shown_path(str(out_dir.absolute()))}"
            + (f" --model {plan.model}" if plan.model else "")
            + " --status --save"
        )
    write_atomic(df, out_dir / FILE, {"plan": plan.name})
    register(out_dir, COLLECTION_TIME, FILE, COLLECTION_TIME, DESCRIPTION, command)
    return df


def groups(step, plan: Plan) -> int | None:
    """How many groups a sampled run (``collect --sample``) measures one at a time in ``step``:
    a sweep's models (all points of one), a bench's models (all batches of one), an
    int8_kernels step's (width, scope) units, a compile_cache step's (width, mode) units, a
    trace step's models (all configs of one); None for a kind that runs whole."""
    if step.kind not in SAMPLED_KINDS:
        return None
    if step.kind == "sweep":
        return len({p.model_key() for p in sweep_spec(step, plan).points()})
    if step.kind == "bench":
        return len({unit_group(u) for u in bench_spec(step, plan).units()})
    if step.kind == "compile_cache":
        return len(cache_spec(step, plan).units())
    if step.kind == "trace":
        return len({u[0] for u in trace_spec(step, plan).units()})
    return len(int8_kernel_spec(step, plan).units())


def sample_table(
    plan: Plan,
    out_dir: str | os.PathLike,
    n: int,
    st: pd.DataFrame | None = None,
    snapshot: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """What ``collect --sample n`` into an empty folder would cost, by root ``out_dir``'s own
    seconds: :func:`yolo_sm.analyse.collection_time.sample_cost` of its :func:`table`
    (``snapshot``: that table, when the caller has made it already)."""
    t = table(plan, out_dir, st) if snapshot is None else snapshot
    return sample_cost(t, n)

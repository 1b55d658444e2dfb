"""Collection plans: a named list of steps (sweeps, Nsight Compute, PyTorch traces, GPM
timelines, the GPU's ceilings, the side-by-side bench) that write the datasets of
``data/<machine>/`` with their manifest entries.

A plan runs across several time-limited commands (the H200 gives 10 minutes a command): each
run skips finished steps, resumes a partial sweep point by point and a partial bench (model,
batch) by (model, batch), and with ``max_minutes`` stops before starting work that would end
past the limit. Steps write their outputs atomically, so a killed run leaves complete files or
none.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
from pathlib import Path

from yolo_sm.collect import numerics, stopwatch
from yolo_sm.collect.bench import BenchSpec, missing_units, run_bench
from yolo_sm.collect.cache_builds import CacheSpec, missing_modes, run_cache_builds
from yolo_sm.collect.ceilings import measure_ceilings
from yolo_sm.collect.devices import nvml_index
from yolo_sm.collect.exporter import record_frame, serve
from yolo_sm.collect.grid import Pace, parse_bool, sampled, table_rows
from yolo_sm.collect.int8_kernels import Int8KernelSpec, run_int8_kernels
from yolo_sm.collect.int8_kernels import missing_seconds as int8_missing_seconds
from yolo_sm.collect.int8_kernels import missing_units as int8_missing_units
from yolo_sm.collect.memory import ALLOC_CONFS, DEFAULT_LIFETIME_MODELS, lifetimes_table, pool_table
from yolo_sm.collect.model_tables import DEFAULT_MODELS, model_layers
from yolo_sm.collect.monitor import Monitor
from yolo_sm.collect.probe import probe_pipeline
from yolo_sm.collect.profiling import kineto, ncu
from yolo_sm.collect.profiling.suite import engines, run_gpm
from yolo_sm.collect.profiling.target import build_parser, configs, target_argv
from yolo_sm.collect.provenance import collect
from yolo_sm.collect.resolutions import ResolutionSpec, run_resolutions
from yolo_sm.collect.sharing import run_sharing_step
from yolo_sm.collect.sweep import SweepSpec, missing_points, point_pace, points_not_in, run_sweep
from yolo_sm.collect.techniques import techniques_table
from yolo_sm.collect.wide_deep import WideDeepSpec, run_wide_vs_deep
from yolo_sm.contract.datasets import PARTIAL_PREFIX
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.gpu_time import add as add_seconds
from yolo_sm.contract.gpu_time import estimate_from_rows, estimate_from_units
from yolo_sm.contract.manifest import entry_problem, recorded_gpu_seconds
from yolo_sm.contract.manifest import register as reg
from yolo_sm.contract.plans import RESUMABLE, Plan, Step, load_plan  # noqa: F401 (collect.plans.load_plan)
from yolo_sm.contract.schema import KEY_COLUMNS
from yolo_sm.contract.scrub import shown_path
from yolo_sm.contract.store import (
    inside,
    output_lock,
    read_arrow,
    write_atomic,
    write_table_atomic,
)
from yolo_sm.contract.workload import clear as clear_workload


def sweep_spec(step: Step, plan: Plan):

    return SweepSpec.from_mapping({"device": plan.device, **_model_params(step, plan)})


def _model_params(step: Step, plan: Plan) -> dict:
    """A step's params with its ``model`` (or the plan's) as the sweep's ``models``."""
    p = dict(step.params)
    model = p.pop("model", None) or getattr(plan, "model", "") or None
    return {**p, "models": model} if model else p


def bench_spec(step: Step, plan: Plan):

    return BenchSpec.from_mapping({"device": plan.device, **step.params})


def cache_spec(step: Step, plan: Plan) -> CacheSpec:

    return CacheSpec.from_mapping({"device": plan.device, **step.params})


def int8_kernel_spec(step: Step, plan: Plan) -> Int8KernelSpec:

    return Int8KernelSpec.from_mapping({"device": plan.device, **step.params})


def _progress(step: Step, plan: Plan, path: Path) -> tuple[int, int, str] | None:
    """(missing, total, what) of a step whose output ``path`` exists and that measures in
    units: points of a sweep, (model, batch) units of a bench, (width, scope) units of an
    int8_kernels step and the compile modes of a compile_cache step (these two start only when
    their missing units fit: :func:`_partial_need`); None for the kinds that run whole."""
    if step.kind == "sweep":
        spec = sweep_spec(step, plan)
        return len(missing_points(spec, path)), len(spec.points()), "points"
    if step.kind == "bench":
        spec = bench_spec(step, plan)
        return len(missing_units(spec, path)), len(spec.units()), "(model, batch) units"
    if step.kind == "int8_kernels":
        spec = int8_kernel_spec(step, plan)
        return len(int8_missing_units(spec, path)), len(spec.units()), "(width, scope) units"
    if step.kind == "compile_cache":
        spec = cache_spec(step, plan)
        return len(missing_modes(spec, path)), len(spec.modes), "compile modes"
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
        if made_with is not None and _canonical(made_with) != _canonical(_model_params(step, plan)):
            return "changed", progress
    if entry_problem(out_dir, step.name, step.out, step.dataset_kind):
        return "unregistered", progress
    return "done", progress


def step_path(step: Step, out_dir: Path) -> Path:
    """The output file of ``step`` in ``out_dir``, checked to stay inside it (one sentence
    otherwise: a plan's ``out`` cannot write elsewhere)."""
    return inside(out_dir, step.out, f"plan step {step.name}'s out")


def _canonical(params) -> str:
    return json.dumps(params, sort_keys=True, default=str)


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


# seconds per sweep point / bench unit when the step's own table cannot tell (no rows yet):
# measured on the H200 reference runs: sweep_fp16_nhwc 1.6 s per point (mean gap between rows),
# bench 50-100 s per unit
DEFAULT_UNIT_S = {"sweep": 1.6, "bench": 80.0}
_SAME_RUN_GAP_S = 30.0  # row gaps longer than this are between runs, not per point


def _row_seconds(df):
    """Seconds each sweep row took within its run: the gap from the previous row (by
    ``prov_date_utc``), NaN for the first row of a run. A gap counts as within a run when it
    exceeds the row's own ``build_s`` (cuDNN autotuning: fp32 eager builds at batch 64 took
    40-70 s on the H200) by less than :data:`_SAME_RUN_GAP_S`; longer gaps are between device
    calls."""
    import pandas as pd

    t = pd.to_datetime(df["prov_date_utc"], errors="coerce", utc=True).dropna().sort_values()
    gap = t.diff().dt.total_seconds()
    build = df["build_s"].reindex(t.index).fillna(0.0) if "build_s" in df else 0.0
    return gap.where(gap - build < _SAME_RUN_GAP_S)


_PACE_KEYS = ("precision", "backend", "batch")


def _pace_table(plan: Plan, out_dir: Path):
    """Median seconds per point by (precision, backend, batch) over the plan's sweep tables
    in ``out_dir`` (empty when none has timed rows)."""
    import pandas as pd

    parts = []
    for s in plan.steps:
        path = step_path(s, out_dir)
        if s.kind != "sweep" or not path.exists():
            continue
        try:
            df = pd.read_parquet(path)
        except Exception:  # noqa: BLE001 - unreadable: left out of the estimate
            continue
        if "prov_date_utc" not in df or not set(_PACE_KEYS) <= set(df):
            continue
        parts.append(df[list(_PACE_KEYS)].assign(sec=_row_seconds(df)).dropna(subset=["sec"]))
    if not parts:
        return pd.DataFrame(columns=[*_PACE_KEYS, "sec"])
    return pd.concat(parts).groupby(list(_PACE_KEYS), as_index=False).sec.median()


def _point_seconds(point, pace) -> float | None:
    """Seconds for one planned sweep point from :func:`_pace_table`: its own key, else the
    nearest measured batch of its precision and backend (scaled up by the batch ratio when the
    point's batch is larger), else None."""
    same = pace[(pace.precision == point.precision) & (pace.backend == point.backend)]
    if same.empty:
        return None
    exact = same[same.batch == point.batch]
    if len(exact):
        return float(exact.sec.iloc[0])
    near = same.iloc[(same.batch - point.batch).abs().argsort().iloc[0]]
    return float(near.sec) * max(1.0, point.batch / float(near.batch))


def unit_seconds(step: Step, path: Path, plan: Plan | None = None) -> tuple[float, str]:
    """Seconds one sweep point or bench unit of ``step`` takes and where that comes from: the
    step's own table (a bench's ``unit_s``; a sweep's mean time per row within one run,
    :func:`_row_seconds`), else for a sweep with ``plan`` the mean over its planned points of
    what the plan's other shipped sweeps took for the same precision, backend and batch
    (``"other sweeps"``; the nearest batch, scaled by the batch ratio, where that batch was not
    measured), else for a bench with ``plan`` its spec's ``est_unit_s`` (``"plan est_unit_s"``,
    the guess its own deadline uses), else :data:`DEFAULT_UNIT_S`."""
    import pandas as pd

    default = DEFAULT_UNIT_S.get(step.kind, step.est_s), "default"
    if step.kind == "bench" and plan is not None:
        default = bench_spec(step, plan).est_unit_s, "plan est_unit_s"
    if step.kind not in RESUMABLE:
        return default
    if path.exists():
        try:
            df = pd.read_parquet(path, columns=None)
        except Exception:  # noqa: BLE001 - an unreadable table: the default; collect says why later
            return default
        if step.kind == "bench" and "unit_s" in df:
            per_unit = df.groupby(["width", "batch"]).unit_s.max().dropna()
            if len(per_unit):
                return float(per_unit.median()), "measured"
        if step.kind == "sweep" and "prov_date_utc" in df and len(df) > 2:
            sec = _row_seconds(df).dropna()
            if len(sec) >= 2 and sec.mean() > 0:
                return float(sec.mean()), "measured"
    if step.kind == "sweep" and plan is not None:
        pace = _pace_table(plan, path.parent)
        if len(pace):
            est = [_point_seconds(p, pace) for p in sweep_spec(step, plan).points()]
            known = [e for e in est if e is not None]
            if known:
                fill = sum(known) / len(known)  # points without any match: the known mean
                return sum(e if e is not None else fill for e in est) / len(est), "other sweeps"
    return default


def _sweep_need(step: Step, plan: Plan, path: Path, per: float, source: str):
    """(seconds, source) the missing points of a partial sweep need: each point as the
    deadline estimates it (:func:`yolo_sm.collect.sweep.point_pace` from the table's rows: the
    nearest measured width of its precision, layout, backend and batch, scaled by the squared
    width ratio), ``per`` seconds (:func:`unit_seconds`) for a point no row matches;
    ``"measured (by width)"`` when any point was estimated so."""
    try:
        rows = table_rows(path, KEY_COLUMNS, "sweep")
    except UserError:  # a table collect cannot resume says why when it runs
        rows = []
    pace = Pace(rows=rows)
    est = [point_pace(p, pace) for p in points_not_in(sweep_spec(step, plan), rows)]
    if not any(est):
        return len(est) * per, source
    return sum(e if e else per for e in est), "measured (by width)"


def status(plan: Plan, out_dir: str | os.PathLike):
    """One row per plan step: its state, for a sweep or bench what is left (``todo``, e.g.
    ``70 of 192 points``) and ``est_left_s``, the time that needs (left x
    :func:`unit_seconds`; ``est_source`` says measured or default); for the other kinds their
    ``est_s`` while not done; the rows its table holds and the GPU seconds it took
    (:func:`step_gpu_seconds`: ``gpu_s``, ``gpu_s_source`` recorded or estimated)."""
    import pandas as pd

    out_dir = Path(out_dir)
    rows = []
    for s in plan.steps:
        state, progress = _state_and_progress(s, plan, out_dir)
        path = step_path(s, out_dir)
        row = {"step": s.name, "kind": s.kind, "state": state, "todo": "", "est_left_s": 0.0}
        row["est_source"] = ""
        if s.kind in RESUMABLE:
            if progress is not None:
                left, total, what = progress
            else:
                total, what = _total_units(s, plan)
                left = total
            if left:
                per, source = unit_seconds(s, path, plan)
                need = left * per
                if s.kind == "sweep" and progress is not None:
                    need, source = _sweep_need(s, plan, path, per, source)
                row.update(todo=f"{left} of {total} {what}", est_left_s=round(need))
                row["est_source"] = source
        elif progress is not None and progress[0]:  # a whole step's units, part measured
            left, total, what = progress
            need, source = _partial_need(s, plan, path)
            row.update(todo=f"{left} of {total} {what}", est_left_s=round(need))
            row["est_source"] = source
        elif state not in ("done", "unregistered"):
            row.update(est_left_s=s.est_s, est_source="plan est_s")
        n, spent, source = step_gpu_seconds(s, plan, out_dir)
        row.update(rows=n, gpu_s=spent, gpu_s_source=source)
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.astype({"rows": "Int64"}) if len(out) else out


def step_gpu_seconds(step: Step, plan: Plan, out_dir: Path) -> tuple:
    """(rows, GPU seconds, source) of a step's table: the seconds its manifest entry records
    (``recorded``: :mod:`yolo_sm.contract.gpu_time`), else an estimate from the table itself
    (``estimated (rows)``: a sweep's phase columns, or its build_s plus its warm-up and budget
    per measured row; a bench's unit_s per unit), else the plan's ``est_s`` (``estimated (plan
    est_s)``); (None, None, "") without a table. A record that is not valid is a UserError."""
    import pandas as pd
    import pyarrow.parquet as pq

    path = step_path(step, out_dir)
    if not path.exists():
        return None, None, ""
    try:
        names = pq.read_schema(path).names
        n = pq.read_metadata(path).num_rows
    except Exception:  # noqa: BLE001 - an unreadable table: collect says why when it reads it
        return None, None, ""
    rec = recorded_gpu_seconds(out_dir, step.name, step.out)
    if rec is not None:
        return n, round(rec["total"], 1), "recorded"
    wanted = ("status", "build_s", "warmup_s", "timed_s", "profile_s", "unit_s", "family", "width")
    df = pd.read_parquet(path, columns=[c for c in (*wanted, "batch") if c in names])
    est = None
    if step.kind == "sweep":
        spec = sweep_spec(step, plan)
        est = estimate_from_rows(df, spec.warmup_ms, spec.budget_ms)
    elif step.kind == "bench":
        est = estimate_from_units(df)
    elif step.kind == "compile_cache" and "process_s" in names:
        est = float(pd.read_parquet(path, columns=["process_s"]).process_s.sum())
    if est is None:
        return n, float(step.est_s), "estimated (plan est_s)"
    return n, round(est, 1), "estimated (rows)"


def gpu_totals(table) -> dict:
    """The plan's GPU seconds so far, from :func:`status`'s table: ``recorded``,
    ``estimated``, their ``total`` and the number of ``tables``."""
    spent = table.gpu_s.astype(float).fillna(0.0)
    recorded = float(spent[table.gpu_s_source == "recorded"].sum())
    estimated = float(spent[table.gpu_s_source.str.startswith("estimated")].sum())
    n = int(table.gpu_s.notna().sum())
    total = recorded + estimated
    return {"recorded": recorded, "estimated": estimated, "total": total, "tables": n}


def recorded_phases(plan: Plan, out_dir) -> list[dict]:
    """The ``gpu_seconds`` records of the plan's steps whose manifest entry has one."""
    out = []
    for s in plan.steps:
        rec = recorded_gpu_seconds(Path(out_dir), s.name, s.out)
        if rec is not None and step_path(s, Path(out_dir)).exists():
            out.append(rec)
    return out


def gpu_total_line(table) -> str:
    """:func:`gpu_totals` in one line."""
    t = gpu_totals(table)
    return (
        f"GPU time of the {t['tables']} tables: {t['recorded']:.0f} s recorded + "
        f"{t['estimated']:.0f} s estimated = {t['total']:.0f} s ({t['total'] / 60:.1f} min)"
    )


def _total_units(step: Step, plan: Plan) -> tuple[int, str]:
    if step.kind == "sweep":
        return len(sweep_spec(step, plan).points()), "points"
    return len(bench_spec(step, plan).units()), "(model, batch) units"


def redo_errors(step: Step, out_dir: Path, match: str = "") -> int:
    """Drop the ``error`` rows (not ``oom``) of a sweep or bench step's table whose ``message``
    contains ``match``, so that the step measures them again when it resumes: the points of a
    sweep, the whole (model, batch) unit of a bench. For errors whose cause has been fixed (e.g.
    a numerical check that ran on noise); an error row holds no measurement, only its message.
    The table is rewritten atomically with its metadata; returns how many rows were dropped."""
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


def run_plan(
    plan: Plan,
    out_dir: str | os.PathLike,
    only: list[str] | None = None,
    max_minutes: float | None = None,
    progress: bool = True,
    register: bool = True,
    redo: str | None = None,
    sample: int | None = None,
):
    """Run the plan's unfinished steps (or those named in ``only``) into ``out_dir``; returns
    the status table afterwards. ``redo`` (a message substring, "" for every error): first
    drop the matching error rows of the sweep and bench steps it runs (:func:`redo_errors`).
    ``sample``: each step of a kind in :data:`SAMPLED_KINDS` measures at most that many more
    groups (a model's units, side by side) and stays partial; the others run whole. Into an
    empty folder that is a sample of the whole plan, whose GPU seconds :func:`status` scales to
    every step (spent, plus what is left at the pace measured)."""
    out_dir = Path(out_dir)
    names = {s.name for s in plan.steps}
    for o in only or []:
        if o not in names:
            raise UserError(
                f"plan {plan.name} has no step {o!r}; steps: {', '.join(sorted(names))}"
            )
    for step in plan.steps:
        step_path(step, out_dir)  # every out inside the folder, before any work
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {out_dir}: {e.strerror or e}") from None
    deadline = time.monotonic() + 60 * max_minutes if max_minutes else None
    with output_lock(out_dir):
        for step in plan.steps:
            if only and step.name not in only:
                continue
            with sampled(sample if step.kind in SAMPLED_KINDS else None):
                _run_step(step, plan, out_dir, deadline, progress, register, redo)
    return status(plan, out_dir)


def registration_command(plan: Plan, out_dir: Path, step: Step) -> str:
    """The command recorded for a step's dataset, as a user would type it (paths relative to
    the working folder)."""
    return (
        f"yolo-sm collect --plan {shown_path(str(Path(plan.path or plan.name).absolute()))} "
        f"--out {shown_path(str(out_dir.absolute()))} --only {step.name}"
        + (f" --model {plan.model}" if plan.model else "")
    )


#: the step kinds a sampled run (``run_plan``'s ``sample``) leaves partial: those that resume
#: unit by unit and whose status scales their missing units from the measured ones (the
#: resumable kinds, and int8_kernels, whose missing units status estimates from its own)
SAMPLED_KINDS = (*RESUMABLE, "int8_kernels")


#: ``register_step``'s default: keep the seconds the step's entry records already
KEEP_SECONDS = "keep"


def register_step(
    step: Step, plan: Plan, out_dir: Path, gpu_seconds: dict | str | None = KEEP_SECONDS
) -> dict:
    """Register ``step``'s table in ``out_dir``'s manifest (and in the table's own metadata);
    ``gpu_seconds``: the step's seconds per phase (:func:`step_seconds`), None for no record,
    else (:data:`KEEP_SECONDS`) the record it holds already is kept."""
    if gpu_seconds == KEEP_SECONDS:
        gpu_seconds = _kept_seconds(step, out_dir)
    return reg(
        out_dir,
        step.name,
        step.out,
        step.dataset_kind,
        progress_note(step, plan, out_dir) + step.description,
        registration_command(plan, out_dir, step),
        params=_model_params(step, plan),
        gpu_seconds=gpu_seconds,
    )


def _kept_seconds(step: Step, out_dir: Path) -> dict | None:
    """The step's recorded seconds, None where there are none or they are not valid (a
    warning says so: the record is dropped and ``collect --status`` estimates the table's
    seconds from its rows)."""
    try:
        return recorded_gpu_seconds(out_dir, step.name, step.out)
    except UserError as e:
        print(
            f"collect: {step.name}: {e}; its seconds are dropped (the table's rows estimate them)",
            file=sys.stderr,
        )
        return None


def step_seconds(step: Step, state: str, out_dir: Path, run: dict) -> dict | None:
    """The ``gpu_seconds`` record of ``step`` after a run that took ``run``: a partial sweep
    or bench adds it to what its earlier runs recorded; any other step starts afresh. None
    for a partial step whose earlier runs recorded nothing (a run killed outright, or a table
    older than the records): this run's seconds alone would pass for the whole table's, so
    the table goes unrecorded and ``collect --status`` estimates all of it from its rows."""
    if state != "partial":
        return add_seconds(None, run)
    before = _kept_seconds(step, out_dir)
    return None if before is None else add_seconds(before, run)


def _need_s(step: Step, plan: Plan, out_dir: Path, state: str) -> float:
    """The seconds a step that runs in units but not to a deadline needs: its ``est_s``, or for
    a partial one (an int8_kernels table holding some of its units) the share of it that its
    missing units stand for."""
    if state == "partial":
        return _partial_need(step, plan, step_path(step, out_dir))[0]
    return step.est_s


def _partial_need(step: Step, plan: Plan, path: Path) -> tuple[float, str]:
    """(seconds, source) the missing units of a partial whole-unit step need: an int8_kernels
    step's estimate from the units its table holds (``measured units``), else the missing
    units' share of its ``est_s`` (``plan est_s``)."""
    if step.kind == "int8_kernels":
        spec = int8_kernel_spec(step, plan)
        seconds = int8_missing_seconds(spec, path)
        if seconds is not None:
            return seconds, "measured units"
    progress = _progress(step, plan, path)
    if progress and progress[1]:
        return step.est_s * progress[0] / progress[1], "plan est_s"
    return step.est_s, "plan est_s"


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
    left = deadline - time.monotonic() if deadline else None
    if left is not None and (
        left <= 0 or (step.kind not in RESUMABLE and _need_s(step, plan, out_dir, state) > left)
    ):
        print(
            f"collect: {step.name} does not fit in the time left ({left:.0f} s); "
            "run the command again",
            file=sys.stderr,
        )
        return
    print(f"collect: {step.name} ({step.kind}, {state})", file=sys.stderr, flush=True)
    with stopwatch.ledger() as spent:
        try:
            RUNNERS[step.kind](step, plan, out_dir, deadline, progress)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli.main): keep what was measured
            if register and step.kind in RESUMABLE and step_path(step, out_dir).exists():
                _register_interrupted(step, plan, out_dir, state, spent)
            raise
    if register and step_path(step, out_dir).exists():
        # a finished step, or a partial sweep / bench (said so in its description): what
        # was measured is usable and the manifest says how much is missing
        register_step(step, plan, out_dir, step_seconds(step, state, out_dir, spent.record()))


def _register_interrupted(step: Step, plan: Plan, out_dir: Path, state: str, spent) -> None:
    """Register a sweep or bench stopped part-way (its table is written after every unit, so
    it holds every finished one) with the seconds this run took, so that a rerun resumes it
    and its GPU time is not lost. Any error here is a warning: the interrupt goes on."""
    try:
        register_step(step, plan, out_dir, step_seconds(step, state, out_dir, spent.record()))
        print(
            f"collect: {step.name}: interrupted; its table is registered as measured so far "
            "(the same command resumes it)",
            file=sys.stderr,
        )
    except (UserError, OSError) as e:
        print(f"collect: {step.name}: interrupted and not registered: {e}", file=sys.stderr)


def _run_sweep(step, plan, out_dir, deadline, progress):

    run_sweep(
        sweep_spec(step, plan), step_path(step, out_dir), progress=progress, deadline=deadline
    )


def _configs(step: Step, plan: Plan):
    """(family, width, precision, layout, batch) tuples of a profiling step's grid."""

    p = step.params
    args = build_parser().parse_args(
        [
            "--family",
            str(p.get("family", "yolov8")),
            "--widths",
            _csv(p.get("widths", "1.0")),
            "--precisions",
            _csv(p.get("precisions", "fp16")),
            "--layouts",
            _csv(p.get("layouts", "nhwc")),
            "--batches",
            _csv(p.get("batches", "8")),
            "--imgsz",
            str(p.get("imgsz", 640)),
            "--device",
            plan.device,
            *_model_argv(step, plan),
        ]
    )
    return args, list(configs(args))


def _model_argv(step: Step, plan: Plan) -> list[str]:
    """``--model`` / ``--input-shape`` of a profiling step (its ``model`` param, or the plan's)."""
    p = _model_params(step, plan)
    out = ["--model", _csv(p["models"])] if p.get("models") else []
    return out + (["--input-shape", _csv(p["input_shape"])] if p.get("input_shape") else [])


def _engines(args, grid, backend: str, device: str):
    """(label, engine, input) for each config of a profiling step's grid, one model per width."""

    return engines(args.family, grid, args.imgsz, device, backend)


def _csv(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _with_provenance(df, device: str):

    prov = collect(device)
    return df.assign(**{f"prov_{k}": v for k, v in prov.items() if not isinstance(v, dict)})


def _run_ncu(step, plan, out_dir, deadline, progress):
    import tempfile

    args, _ = _configs(step, plan)
    p = step.params
    target = target_argv(
        args.family,
        args.widths,
        args.precisions,
        args.layouts,
        args.batches,
        args.imgsz,
        plan.device,
        models=args.model or None,
        input_shape=args.input_shape,
    )
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp, stopwatch.phase("profile"):
        df = ncu.profile(
            target,
            Path(tmp) / "ncu.csv",
            metric_set=p.get("metric_set", "occupancy"),
            timeout_s=float(p.get("timeout_s", 540)),
            # the full report beside the table, for the Nsight Compute GUI
            report=out_dir / f"{Path(step.out).stem}.ncu-rep",
            kernel_regex=p.get("kernel_regex"),
        )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_trace(step, plan, out_dir, deadline, progress):
    import pandas as pd

    args, grid = _configs(step, plan)
    backend = step.params.get("backend", "eager")
    traces = out_dir / "traces"
    frames = []
    for label, eng, x in _engines(args, grid, backend, plan.device):
        path = traces / f"{step.name}-{label}.json.gz"
        if not path.exists():  # traces already written by an interrupted run are kept
            hooked = eng.module if backend == "eager" else None
            with stopwatch.phase("profile"):
                kineto.capture(
                    lambda eng=eng, x=x: eng(x),
                    path,
                    model=hooked,
                    iters=int(step.params.get("iters", 2)),
                    device=plan.device,
                )
        eng.close()
        frames.append(kineto.load_kernels(path).assign(config=label, backend=backend))
    _write(
        _with_provenance(pd.concat(frames, ignore_index=True), plan.device),
        step_path(step, out_dir),
    )


def _run_gpm(step, plan, out_dir, deadline, progress):
    """Each config runs back to back for ``seconds`` while the sampler marks it; idle gaps of
    ``gap_s`` separate configs so the timeline shows where each starts."""

    args, grid = _configs(step, plan)
    built = list(_engines(args, grid, step.params.get("backend", "eager"), plan.device))
    with stopwatch.phase("profile"):
        frame, info = run_gpm(
            built,
            seconds=float(step.params.get("seconds", 3.0)),
            gap_s=float(step.params.get("gap_s", 0.5)),
            hz=float(step.params.get("hz", 20)),
        )
    _write(_with_provenance(frame, plan.device), step_path(step, out_dir), {"sampler": info})
    for _, eng, _ in built:
        eng.close()


def _write(df, path: Path, metadata: dict | None = None) -> None:

    write_atomic(df, path, metadata)


def _run_ceilings(step, plan, out_dir, deadline, progress):
    """Matmul peaks per precision, copy bandwidths, one frame's host-to-device copy."""

    p = step.params
    df = measure_ceilings(
        plan.device,
        n=tuple(p["n"]) if isinstance(p.get("n"), list) else int(p.get("n", 8192)),
        copy_bytes=int(p.get("copy_bytes", 1 << 30)),
        budget_ms=float(p.get("budget_ms", 300)),
        fill=str(p.get("fill", "randn")),
    )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_numerics(step, plan, out_dir, deadline, progress):
    """Numerical error per width and precision on random inputs and the bundled photos, and
    box agreement after NMS (yolo_sm.collect.numerics.numerics_table), with provenance."""

    p = dict(step.params)
    unknown = set(p) - set(inspect.signature(numerics.numerics_table).parameters) - {"device"}
    if unknown:
        raise UserError(f"plan step {step.name}: unknown numerics params {sorted(unknown)}")
    for k in ("widths", "precisions", "photo_precisions", "box_precisions", "seeds") + (
        "int8_calibrations",
        "class_priors",
    ):
        if k in p:
            p[k] = tuple(p[k]) if isinstance(p[k], (list, tuple)) else (p[k],)
    if "class_priors" in p:
        p["class_priors"] = tuple(parse_bool(v, "class_priors") for v in p["class_priors"])
    df = numerics.numerics_table(device=plan.device, **p)
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_probe(step, plan, out_dir, deadline, progress):
    """A frames-to-boxes batch stage by stage (yolo_sm.collect.probe), with provenance."""

    p = step.params
    df = probe_pipeline(
        family=str(p.get("family", "yolov8")),
        width=float(p.get("width", 0.5)),
        batch=int(p.get("batch", 16)),
        reps=int(p.get("reps", 10)),
        device=plan.device,
        imgsz=int(p.get("imgsz", 640)),
        frames=str(p.get("frames", "bus")),
    )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_model_tables(step, plan, out_dir, deadline, progress):
    """Shapes, FLOPs and bytes per model and layer (yolo_sm.collect.model_tables), counted on
    this host's CPU whatever the plan's device (they do not depend on the GPU): the provenance
    says so."""

    p = step.params
    model = _model_params(step, plan).get("models")
    default = [{"model": m} for m in _csv(model).split(",")] if model else DEFAULT_MODELS
    df = model_layers(
        p.get("models", default),
        imgsz=int(p.get("imgsz", 640)),
        bytes_per_element=int(p.get("bytes_per_element", 2)),
    )
    df = _with_provenance(df, "cpu")
    empty = [c for c in df if c.startswith("prov_") and df[c].isna().all()]  # no GPU here
    _write(df.drop(columns=empty), step_path(step, out_dir))


def _run_bench(step, plan, out_dir, deadline, progress):
    """Baseline, engines, pipeline per stream count and YOLO.predict per (model, batch); rows
    carry their own provenance. Resumes per (model, batch), stops before one that would end
    past the deadline (yolo_sm.collect.bench)."""

    run_bench(
        bench_spec(step, plan), step_path(step, out_dir), progress=progress, deadline=deadline
    )


def _run_techniques(step, plan, out_dir, deadline, progress):
    """Fusion, autocast and the batch buffer side by side in one process
    (yolo_sm.collect.techniques.techniques_table), with provenance."""
    p = dict(step.params)
    for k in (
        "techniques",
        "backends",
        "resnet_batches",
        "widths",
        "autocast_batches",
        "buffer_batches",
    ):
        if k in p:
            p[k] = tuple(p[k]) if isinstance(p[k], (list, tuple)) else (p[k],)
    df = techniques_table(device=plan.device, **p)
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_compile_cache(step, plan, out_dir, deadline, progress):
    """A cold and a warm torch.compile build per mode, each in a fresh process
    (yolo_sm.collect.cache_builds)."""

    spec = cache_spec(step, plan)
    run_cache_builds(
        spec,
        step_path(step, out_dir),
        progress=progress,
        deadline=deadline,
        est_mode_s=step.est_s / len(spec.modes),
    )


RUNNERS = {
    "techniques": _run_techniques,
    "sweep": _run_sweep,
    "ncu": _run_ncu,
    "numerics": _run_numerics,
    "trace": _run_trace,
    "gpm": _run_gpm,
    "ceilings": _run_ceilings,
    "bench": _run_bench,
    "probe": _run_probe,
    "model_tables": _run_model_tables,
    "compile_cache": _run_compile_cache,
}


# --- activation lifetimes and the caching allocator's pool (collect.memory) -----------------


def _run_memory_lifetimes(step, plan, out_dir, deadline, progress):
    """Activation lifetimes per layer and tensor of each model's forward, with the measured
    peak on a GPU (yolo_sm.collect.memory.lifetimes)."""
    p = step.params
    df = lifetimes_table(
        p.get("models", DEFAULT_LIFETIME_MODELS),
        batch=int(p.get("batch", 16)),
        imgsz=int(p.get("imgsz", 640)),
        precision=str(p.get("precision", "fp16")),
        layout=str(p.get("layout", "nhwc")),
        device=plan.device,
    )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_memory_pool(step, plan, out_dir, deadline, progress):
    """One run of random batch sizes per allocator configuration, each in its own process
    (yolo_sm.collect.memory.pool)."""
    p = dict(step.params)
    confs = p.pop("confs", ALLOC_CONFS)
    timeout = float(p.pop("timeout_s", 300))
    if "family" in p:
        p["model"] = p.pop("family")
    df = pool_table(
        tuple(confs) if isinstance(confs, (list, tuple)) else (confs,),
        timeout_s=timeout,
        device=plan.device,
        **p,
    )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


RUNNERS["memory_lifetimes"] = _run_memory_lifetimes
RUNNERS["memory_pool"] = _run_memory_pool


# --- model shapes and input shapes ----------------------------------------------------------


def _run_wide_vs_deep(step, plan, out_dir, deadline, progress):
    """FLOPs-matched wide and deep YOLO pairs timed side by side (yolo_sm.collect.wide_deep)."""

    spec = WideDeepSpec.from_mapping({"device": plan.device, **step.params})
    run_wide_vs_deep(spec, step_path(step, out_dir), progress=progress, deadline=deadline)


def _run_resolutions(step, plan, out_dir, deadline, progress):
    """Fixed-shape engines per resolution against one dynamic engine
    (yolo_sm.collect.resolutions)."""

    spec = ResolutionSpec.from_mapping({"device": plan.device, **step.params})
    run_resolutions(spec, step_path(step, out_dir), progress=progress)


RUNNERS["wide_vs_deep"] = _run_wide_vs_deep
RUNNERS["resolutions"] = _run_resolutions


def _run_sharing(step, plan, out_dir, deadline, progress):
    """Two engines at once, alone and together (yolo_sm.collect.sharing): the step's table,
    and beside it ``<step>_gpm`` (the GPM timeline) and ``<step>_kernels`` (kernel classes of
    the short traces), registered here, before the runner registers the step's own."""
    tables = run_sharing_step(step.params, plan.device)
    stem = Path(step.out).stem
    command = registration_command(plan, out_dir, step)
    for suffix, kind in (("gpm", "gpm"), ("kernels", "sharing_kernels")):
        if tables[suffix].empty:  # a CPU: no GPM, no GPU kernels
            continue
        name, file = f"{step.name}_{suffix}", f"{stem}_{suffix}.parquet"
        _write(_with_provenance(tables[suffix], plan.device), inside(out_dir, file, name))
        what = {"gpm": "NVML GPM timeline (with board power)", "kernels": "kernel classes"}
        reg(
            out_dir,
            name,
            file,
            kind,
            f"{what[suffix]} of {step.name}: {step.description}",
            command,
            params=_model_params(step, plan),
        )
    _write(
        _with_provenance(tables["sharing"], plan.device),
        step_path(step, out_dir),
        {"sampler": tables["sampler"]},
    )


RUNNERS["sharing"] = _run_sharing


# --- live monitoring beside a bench -----------------------------------------------------------


def _run_monitor(step, plan, out_dir, deadline, progress):
    """The live monitor (collect.monitor: dcgm-exporter's fields every ``interval`` s, on
    ``/metrics`` at 127.0.0.1:``port``, 0 = a free one) while the step's bench (the bench
    kind's params) runs in this process and labels the samples with what it runs; ``idle_s``
    of idle before and after. Without prometheus_client the samples are recorded all the same
    (no endpoint). The bench's own table is not kept: the step's dataset is the
    monitor's samples (kind ``monitor``)."""
    import tempfile

    p = dict(step.params)
    interval = float(p.pop("interval", 1.0))
    port = int(p.pop("port", 0))
    idle_s = float(p.pop("idle_s", 2.0))
    spec = BenchSpec.from_mapping({"device": plan.device, **p})
    if not spec.on_gpu:
        raise UserError(f"plan step {step.name} monitors a GPU: the plan's device must be cuda")
    mon = Monitor(index=nvml_index(plan.device), interval=interval)
    try:
        server = serve(mon, port=port, address="127.0.0.1")
        print(f"collect: {step.name}: /metrics at {server.url}", file=sys.stderr, flush=True)
    except NotAvailableError as e:  # prometheus_client missing: the samples are still recorded
        server = None
        print(f"collect: {step.name}: no /metrics ({e})", file=sys.stderr, flush=True)
    try:
        with mon, tempfile.TemporaryDirectory(dir=out_dir) as tmp:
            time.sleep(idle_s)
            try:
                run_bench(spec, Path(tmp) / "bench.parquet", progress=progress)
            finally:
                clear_workload()
            time.sleep(idle_s)
    finally:
        if server is not None:
            server.close()
    meta = {"monitor": {"interval_s": interval, "ticks": mon.ticks}, "bench": str(spec)}
    _write(record_frame(mon), step_path(step, out_dir), meta)


RUNNERS["monitor"] = _run_monitor


def _run_int8_kernels(step, plan, out_dir, deadline, progress):
    """Each int8 convolution kernel per convolution and per model, beside fp16
    (yolo_sm.collect.int8_kernels)."""
    spec = int8_kernel_spec(step, plan)
    run_int8_kernels(spec, step_path(step, out_dir), progress=progress, deadline=deadline)


RUNNERS["int8_kernels"] = _run_int8_kernels

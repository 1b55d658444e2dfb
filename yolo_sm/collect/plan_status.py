"""What a collection plan has left, and what it cost: each step's state (done, partial,
changed, unregistered, missing), what a partial one lacks and the seconds that needs (paced by
the step's own rows, the plan's other tables or its estimates), and the GPU seconds each table
took (recorded by the manifest, or estimated from its rows)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from yolo_sm.collect.bench import missing_units, per_spec_variants
from yolo_sm.collect.cache_builds import missing_seconds as cache_missing_seconds
from yolo_sm.collect.cache_builds import missing_units as cache_missing_units
from yolo_sm.collect.grid import Pace, table_rows
from yolo_sm.collect.int8_kernels import missing_seconds as int8_missing_seconds
from yolo_sm.collect.int8_kernels import missing_units as int8_missing_units
from yolo_sm.collect.plan_runners import (
    bench_spec,
    cache_spec,
    int8_kernel_spec,
    model_params,
    step_path,
    sweep_spec,
    trace_spec,
)
from yolo_sm.collect.profiling import trace_units
from yolo_sm.collect.sweep import missing_points, point_pace, points_not_in
from yolo_sm.contract.datasets import PARTIAL_PREFIX
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.gpu_time import (
    LEFT_BY_DEFAULT,
    LEFT_BY_PLAN,
    LEFT_BY_PLAN_UNIT,
    PHASE_COLUMNS,
    SPENT_BY_PLAN,
    estimate_from_rows,
    estimate_from_units,
    held_by_rows,
    row_phases,
)
from yolo_sm.contract.manifest import entry_problem, recorded_gpu_seconds
from yolo_sm.contract.plans import RESUMABLE, SCHEDULING_PARAMS, Plan, Step
from yolo_sm.contract.schema import KEY_COLUMNS


def _progress(step: Step, plan: Plan, path: Path) -> tuple[int, int, str] | None:
    """(missing, total, what) of a step whose output ``path`` exists and that measures in
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
        spec = int8_kernel_spec(step, plan)
        return len(int8_missing_units(spec, path)), len(spec.units()), "(width, scope) units"
    if step.kind == "compile_cache":
        spec = cache_spec(step, plan)
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


def unit_seconds(step: Step, path: Path, plan: Plan | None = None, pace=None) -> tuple[float, str]:
    """Seconds one sweep point or bench unit of ``step`` takes and where that comes from: the
    step's own table (a bench's ``unit_s``; a sweep's mean time per row within one run,
    :func:`_row_seconds`), else for a sweep with ``plan`` the mean over its planned points of
    what the plan's other shipped sweeps took for the same precision, backend and batch
    (``"other sweeps"``; the nearest batch, scaled by the batch ratio, where that batch was not
    measured), else for a bench with ``plan`` its spec's ``est_unit_s`` (``"plan est_unit_s"``,
    the guess its own deadline uses), else :data:`DEFAULT_UNIT_S`. ``pace``, where given, is
    :func:`_pace_table` of the plan's folder, read once for all its steps."""
    import pandas as pd

    default = DEFAULT_UNIT_S.get(step.kind, step.est_s), LEFT_BY_DEFAULT
    if step.kind == "bench" and plan is not None:
        default = bench_spec(step, plan).est_unit_s, LEFT_BY_PLAN_UNIT
    if step.kind not in RESUMABLE:
        return default
    if path.exists():
        try:
            df = pd.read_parquet(path, columns=None)
        except Exception:  # noqa: BLE001 - an unreadable table: the default; collect says why later
            return default
        if step.kind == "bench" and "unit_s" in df:
            if plan is not None and "variant" in df:
                # a unit measured with other engines than the spec's: per engine, times the
                # spec's (as the bench's own deadline counts it)
                rows = df.to_dict("records")
                df = pd.DataFrame(per_spec_variants(rows, len(bench_spec(step, plan).variants())))
            per_unit = df.groupby(["width", "batch"]).unit_s.max().dropna()
            if len(per_unit):
                return float(per_unit.median()), "measured"
        if step.kind == "sweep" and "prov_date_utc" in df and len(df) > 2:
            sec = _row_seconds(df).dropna()
            if len(sec) >= 2 and sec.mean() > 0:
                return float(sec.mean()), "measured"
    if step.kind == "sweep" and plan is not None:
        pace = _pace_table(plan, path.parent) if pace is None else pace
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
    rows, pace = [], None
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
                if pace is None and s.kind == "sweep":
                    pace = _pace_table(plan, out_dir)  # once: every sweep table of the plan
                per, source = unit_seconds(s, path, plan, pace)
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
            row.update(est_left_s=s.est_s, est_source=LEFT_BY_PLAN)
        n, spent, source = step_gpu_seconds(s, plan, out_dir)
        row.update(rows=n, gpu_s=spent, gpu_s_source=source)
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.astype({"rows": "Int64"}) if len(out) else out


def step_gpu_seconds(step: Step, plan: Plan, out_dir: Path) -> tuple:
    """(rows, GPU seconds, source) of a step's table: the seconds its manifest entry records
    for the rows the table holds (``recorded``: :func:`step_record`), else an estimate from the
    table itself (``estimated (rows)``: a sweep's phase columns, or its build_s plus its warm-up
    and budget per measured row; a bench's unit_s per unit), else the plan's ``est_s``
    (``estimated (plan est_s)``); (None, None, "") without a table. A record that is not
    valid is a UserError."""
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
    rec, _ = step_record(step, out_dir)
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
        return n, float(step.est_s), SPENT_BY_PLAN
    return n, round(est, 1), "estimated (rows)"


def step_record(step: Step, out_dir: Path) -> tuple[dict | None, float]:
    """The ``gpu_seconds`` record of ``step``'s table as far as it made the rows the table
    holds, and the recorded seconds of work the table no longer holds
    (:func:`yolo_sm.contract.gpu_time.held_by_rows`: units measured again, runs stopped mid-unit);
    (None, 0.0) without a table or a record. One definition for every reader: a root's spent
    seconds, its snapshot and a sample scaled to the whole plan all count what their tables
    hold, not how many runs it took to get there."""
    import pandas as pd
    import pyarrow.parquet as pq

    path = step_path(step, Path(out_dir))
    rec = recorded_gpu_seconds(Path(out_dir), step.name, step.out) if path.exists() else None
    if rec is None or rec["runs"] <= 1:
        return rec, 0.0
    try:
        names = pq.read_schema(path).names
        cols = [c for c in PHASE_COLUMNS.values() if c in names]
        df = pd.read_parquet(path, columns=cols)
    except Exception:  # noqa: BLE001 - an unreadable table: collect says why when it reads it
        return rec, 0.0
    return held_by_rows(rec, row_phases(df))


def gpu_totals(table) -> dict:
    """The plan's GPU seconds so far, from :func:`status`'s table: ``recorded``,
    ``estimated``, their ``total`` and the number of ``tables``."""
    spent = table.gpu_s.astype(float).fillna(0.0)
    recorded = float(spent[table.gpu_s_source == "recorded"].sum())
    estimated = float(spent[table.gpu_s_source.str.startswith("estimated")].sum())
    n = int(table.gpu_s.notna().sum())
    total = recorded + estimated
    return {"recorded": recorded, "estimated": estimated, "total": total, "tables": n}


def recorded_phases(plan: Plan, out_dir) -> tuple[list[dict], float]:
    """The ``gpu_seconds`` records of the plan's steps whose table and manifest entry have
    one, each as far as it made the table's rows (:func:`step_record`), and the recorded
    seconds of work the tables no longer hold, summed."""
    out, superseded = [], 0.0
    for s in plan.steps:
        rec, gone = step_record(s, Path(out_dir))
        if rec is not None:
            out.append(rec)
            superseded += gone
    return out, superseded


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


def need_s(step: Step, plan: Plan, out_dir: Path, state: str) -> float:
    """The seconds a step needs before it starts: its ``est_s``, or for a partial one (a
    table holding some of its units) what its missing units need (:func:`_partial_need`).
    collect waits for it to fit in the time left only for the kinds that do not stop at a
    deadline themselves (``contract.plans.TO_DEADLINE``)."""
    if state == "partial":
        return _partial_need(step, plan, step_path(step, out_dir))[0]
    return step.est_s


def _partial_need(step: Step, plan: Plan, path: Path) -> tuple[float, str]:
    """(seconds, source) the missing units of a partial whole-unit step need: an int8_kernels,
    compile_cache or trace step's estimate from the units its table holds (``measured units``; a
    compile mode not built yet by the plan's ``mode_est_s``: ``measured units, mode_est_s``),
    else the missing units' share of its ``est_s`` (``plan est_s``)."""
    seconds, source = None, "measured units"
    if step.kind == "int8_kernels":
        seconds = int8_missing_seconds(int8_kernel_spec(step, plan), path)
    elif step.kind == "compile_cache":
        seconds, by_plan = cache_missing_seconds(cache_spec(step, plan), path)
        if by_plan:
            source += ", mode_est_s"
    elif step.kind == "trace":
        seconds = trace_units.missing_seconds(trace_spec(step, plan), path)
    if seconds is not None:
        return seconds, source
    progress = _progress(step, plan, path)
    if progress and progress[1]:
        return step.est_s * progress[0] / progress[1], LEFT_BY_PLAN
    return step.est_s, LEFT_BY_PLAN

"""The GPU seconds a collection step took: the ``gpu_seconds`` record of a manifest entry, the
per-row phase columns of sweep and bench tables, and estimates for tables collected before
either was recorded.

A step's record holds wall seconds per phase (:data:`PHASES`: building engines, warming up,
timed calls, profiler passes), ``other`` (model builds, provenance, writing tables: the rest of
the step's wall time) and ``total``, plus ``runs``, how many runs of the step the record sums
(a resumable sweep or bench adds its runs up)."""

from __future__ import annotations

import math

from yolo_sm.contract.errors import UserError

#: the timed phases of a step, each with the per-row column that holds a row's share
PHASES = ("build", "warmup", "timed", "profile")
PHASE_COLUMNS = {p: f"{p}_s" for p in PHASES}
#: the keys of a manifest entry's ``gpu_seconds`` record
KEYS = (*PHASES, "other", "total", "runs")
#: the most seconds one record may hold (a year): larger is a corrupt value
MAX_SECONDS = 365 * 86400.0

#: where a step's seconds come from when its table says nothing of them: the plan's own
#: figures (a step's ``est_s``, a bench's ``est_unit_s``) or a built-in default. The first is
#: a spent source (``collect --status``'s ``gpu_s_source``), the others left sources
#: (``est_source``); a snapshot's ``spent_source`` and ``left_source`` keep them.
SPENT_BY_PLAN = "estimated (plan est_s)"
LEFT_BY_PLAN = "plan est_s"
LEFT_BY_PLAN_UNIT = "plan est_unit_s"
LEFT_BY_DEFAULT = "default"
#: the sources of seconds that no measurement paced: guesses
GUESSED_SOURCES = frozenset({SPENT_BY_PLAN, LEFT_BY_PLAN, LEFT_BY_PLAN_UNIT, LEFT_BY_DEFAULT})


def check_gpu_seconds(value, where: str) -> dict:
    """``value`` as a ``gpu_seconds`` record (a mapping of :data:`KEYS` to finite seconds
    between 0 and :data:`MAX_SECONDS`, ``runs`` a positive whole number, ``total`` at least the
    sum of the phases); anything else one UserError naming ``where``."""
    if not isinstance(value, dict):
        raise UserError(f"{where} gpu_seconds must be a mapping, got {type(value).__name__}")
    unknown = sorted(set(map(str, value)) - set(KEYS))
    if unknown:
        raise UserError(f"{where} gpu_seconds has unknown key(s) {', '.join(unknown)}")
    out = {}
    for k in KEYS:
        v = value.get(k, 1 if k == "runs" else 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise UserError(f"{where} gpu_seconds {k} must be a finite number, got {v!r}")
        if not 0 <= v <= MAX_SECONDS:
            raise UserError(f"{where} gpu_seconds {k} must be between 0 and {MAX_SECONDS:g} s")
        out[k] = float(v)
    if out["runs"] < 1 or out["runs"] != int(out["runs"]):
        raise UserError(f"{where} gpu_seconds runs must be a positive whole number")
    out["runs"] = int(out["runs"])
    if out["total"] + 1e-6 < sum(out[p] for p in (*PHASES, "other")):
        raise UserError(f"{where} gpu_seconds total is less than the sum of its phases")
    return out


def record(phases: dict, total: float) -> dict:
    """The record of one run: ``phases`` (seconds per phase of :data:`PHASES`, outermost phases
    only, so they never overlap) and the run's wall ``total``; ``other`` is the rest."""
    out = {p: round(float(phases.get(p, 0.0)), 3) for p in PHASES}
    total = max(float(total), sum(out.values()))
    out["other"] = round(max(0.0, total - sum(out.values())), 3)
    out["total"] = round(total, 3)
    out["runs"] = 1
    return out


def add(a: dict | None, b: dict) -> dict:
    """Two records summed (``a`` None: ``b``)."""
    if a is None:
        return dict(b)
    out = {k: round(a[k] + b[k], 3) for k in KEYS if k != "runs"}
    out["runs"] = int(a["runs"] + b["runs"])
    return out


def row_phases(df) -> dict:
    """Per phase of :data:`PHASES` the seconds a table's rows carry (its phase column summed),
    for the phases the table has a column of."""
    return {p: float(df[c].fillna(0.0).sum()) for p, c in PHASE_COLUMNS.items() if c in df}


def held_by_rows(rec: dict, rows: dict) -> tuple[dict, float]:
    """The part of record ``rec`` that made the rows a table holds now, and the seconds it
    leaves out. A record summing several runs of a resumable step also holds work its table no
    longer holds: units measured again (an engine joined the plan, error rows redone) and
    units of runs stopped mid-unit. ``rows``: :func:`row_phases` of the table. Each phase is
    the rows' own seconds, at most the record's (a phase the rows have no column of is kept
    whole); ``other`` is the record's, scaled by the share of the record's phase seconds the
    rows keep (the rows cannot say which run's overhead made them); ``total`` their sum. A
    record of one run, or without phase seconds, is kept whole: there is nothing to tell
    apart. Returns (the kept record, the record's total less the kept one)."""
    phase_sum = sum(rec[p] for p in PHASES)
    if rec["runs"] <= 1 or not phase_sum > 0:
        return dict(rec), 0.0
    out = {p: min(rec[p], rows.get(p, rec[p])) for p in PHASES}
    share = sum(out.values()) / phase_sum
    out["other"] = rec["other"] * share
    # the record's total may exceed its phases and other (a record made by hand): scaled alike
    out["total"] = (
        sum(out[p] for p in PHASES)
        + out["other"]
        + share * max(0.0, rec["total"] - phase_sum - rec["other"])
    )
    gone = round(max(0.0, rec["total"] - out["total"]), 3)
    out = {k: round(v, 3) for k, v in out.items()}
    out["runs"] = rec["runs"]
    return out, gone


def estimate_from_rows(df, warmup_ms: float | None = None, budget_ms: float | None = None):
    """Estimated seconds of a sweep-like table that carries no record: the sum of its rows'
    phase columns where it has them; else its ``build_s`` plus, per measured (``ok``) row,
    ``warmup_ms + budget_ms`` (the settings the rows were timed with). None when the table
    says nothing of its time."""
    have = [c for c in PHASE_COLUMNS.values() if c in df]
    if "warmup_s" in have or "timed_s" in have:
        return float(df[have].fillna(0.0).to_numpy().sum())
    if "build_s" not in df:
        return None
    seconds = float(df["build_s"].fillna(0.0).sum())
    if warmup_ms is not None and budget_ms is not None:
        ok = int((df["status"] == "ok").sum()) if "status" in df else len(df)
        seconds += ok * (warmup_ms + budget_ms) / 1000.0
    return seconds


def estimate_from_units(df, unit_columns=("family", "width", "batch")):
    """Estimated seconds of a bench table without a record: the sum over its (model, batch)
    units of ``unit_s`` (the wall time each unit took, on every row of it); None without it."""
    if "unit_s" not in df or not set(unit_columns) <= set(df):
        return None
    per_unit = df.groupby(list(unit_columns)).unit_s.max().dropna()
    return float(per_unit.sum()) if len(per_unit) else None


def phase_line(records) -> str:
    """Where the recorded GPU seconds of several steps went, in one line: each phase's sum and
    its share of the total (``records``: ``gpu_seconds`` records; '' when there are none)."""
    total = None
    for r in records:
        total = add(total, r)
    if total is None or not total["total"] > 0:
        return ""
    parts = ", ".join(
        f"{p} {total[p]:.0f} s ({100 * total[p] / total['total']:.0f} %)"
        for p in (*PHASES, "other")
    )
    return f"recorded GPU time by phase ({total['runs']} runs): {parts}"

"""Facts: the measured numbers that conclusions are drawn from, as one tidy table.

A fact is one number with its unit, read off the datasets by a topic's ``facts(root)``
function: ``key`` names it (``"tensor_pipe_pct_below_60_occupancy"``), ``scope`` says which
part of the data it describes (``"width=1.0"``; empty for the whole), ``datasets`` which
tables it comes from. A fact whose data is missing is left out (or NaN): the rule that reads
it then says "not tested" instead of guessing. Rules (:mod:`yolo_sm.report.rules`) compare
facts with thresholds; nothing here judges.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

FACT_COLUMNS = ("key", "value", "unit", "scope", "datasets", "note", "clock_spread_pct")


def fact(
    key: str,
    value: float,
    unit: str = "",
    *,
    scope: str = "",
    datasets: Iterable[str] = (),
    note: str = "",
    clock_spread_pct: float = math.nan,
    points: int | None = None,
) -> dict:
    """One fact row. ``value`` becomes a float (NaN where it is None or not a number).
    ``clock_spread_pct``: for a ratio between rows, how far apart (%) their SM clocks were
    (:func:`clock_spread_pct`); NaN where the fact compares no clocked rows. ``points``: how
    many points a count or share is taken over; with none the value is NaN (a rule over no
    point reads "not tested", it does not hold vacuously)."""
    try:
        v = float(value) if points != 0 else math.nan
    except (TypeError, ValueError):
        v = math.nan
    return {
        "key": str(key),
        "value": v,
        "unit": str(unit),
        "scope": str(scope),
        "datasets": tuple(datasets),
        "note": str(note),
        "clock_spread_pct": float(clock_spread_pct),
    }


def facts_table(rows: Iterable[dict]) -> pd.DataFrame:
    """The facts as a DataFrame with :data:`FACT_COLUMNS`; raises ``ValueError`` when a
    (key, scope) pair appears twice, since a rule could not tell which one to read."""
    df = pd.DataFrame(list(rows), columns=list(FACT_COLUMNS))
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    dup = df[df.duplicated(["key", "scope"], keep=False)]
    if len(dup):
        pairs = sorted({(k, s) for k, s in zip(dup.key, dup.scope, strict=True)})
        raise ValueError(f"facts named twice (key, scope): {pairs}")
    return df.reset_index(drop=True)


def concat(*tables: pd.DataFrame) -> pd.DataFrame:
    """Several facts tables as one (checked like :func:`facts_table`)."""
    frames = [t for t in tables if t is not None and len(t)]
    if not frames:
        return facts_table([])
    return facts_table(pd.concat(frames, ignore_index=True).to_dict("records"))


def value(facts: pd.DataFrame, key: str, scope: str = "") -> float:
    """The value of fact ``key`` (in ``scope``), NaN when it is not there."""
    hit = facts[(facts.key == key) & (facts.scope == scope)]
    return float(hit.value.iloc[0]) if len(hit) else math.nan


def sm_clock_mhz(df: pd.DataFrame) -> pd.Series:
    """Each row's SM clock (MHz) while it was timed: the median over its interleaved rounds
    (``sm_clock_mhz``) where recorded, else the mean of the clocks read before and after its
    timing, else the provenance's one reading (NaN without)."""
    nan = pd.Series(math.nan, index=df.index)
    one = df.get("prov_sm_clock_mhz", nan).astype(float)
    if "prov_sm_clock_start_mhz" in df and "prov_sm_clock_end_mhz" in df:
        both = (df["prov_sm_clock_start_mhz"] + df["prov_sm_clock_end_mhz"]) / 2
        one = both.astype(float).fillna(one)
    return df.get("sm_clock_mhz", nan).astype(float).fillna(one)


def clock_spread_pct(a: float, b: float) -> float:
    """How far apart two SM clocks are: ``|a - b|`` over the higher, in %."""
    return abs(a - b) / max(a, b) * 100 if a > 0 and b > 0 else math.nan

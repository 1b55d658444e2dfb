"""Facts: the measured numbers conclusions are drawn from, one tidy table (key, value, unit,
scope, datasets). A fact lacking data is left out or NaN, so its rule reads "not tested"."""

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
    """One fact row; ``value`` NaN when not a number or taken over ``points=0``.
    ``clock_spread_pct``: how far apart (%) a ratio's SM clocks were."""
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
    """The facts as a DataFrame; ValueError when a (key, scope) pair appears twice."""
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
    """Each row's SM clock (MHz) while timed: ``sm_clock_mhz``, else the mean of the clocks
    before and after, else the provenance's reading."""
    nan = pd.Series(math.nan, index=df.index)
    one = df.get("prov_sm_clock_mhz", nan).astype(float)
    if "prov_sm_clock_start_mhz" in df and "prov_sm_clock_end_mhz" in df:
        both = (df["prov_sm_clock_start_mhz"] + df["prov_sm_clock_end_mhz"]) / 2
        one = both.astype(float).fillna(one)
    return df.get("sm_clock_mhz", nan).astype(float).fillna(one)


def clock_spread_pct(a: float, b: float) -> float:
    """How far apart two SM clocks are: ``|a - b|`` over the higher, in %."""
    return abs(a - b) / max(a, b) * 100 if a > 0 and b > 0 else math.nan

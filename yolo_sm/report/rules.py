"""Rules: every conclusion yolo_sm draws, as data (each topic's ``rules.toml``, :func:`load`).
A :class:`Rule` holds when ``fact op threshold`` (a looser ``partly`` threshold reads "partly");
a missing fact reads "not tested". A ratio whose sides ran at SM clocks over
:data:`CLOCK_SHARE_PCT` apart carries a caveat."""

from __future__ import annotations

import functools
import math
import operator
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

import pandas as pd

from yolo_sm.report import tables
from yolo_sm.report.colors import VERDICT_COLORS

HOLDS, PARTLY, FAILS, NOT_TESTED = "holds", "partly", "does not hold", "not tested"
VERDICTS = (HOLDS, PARTLY, FAILS, NOT_TESTED)
OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
#: the units a rule may state its fact in
UNITS = frozenset(
    {"", "x", "%", "pp", "points", "s", "min", "ratio", "rows", "limits", "block sizes", "waves",
     "runs", "layers", "batches", "engines", "convs", "types", "builds", "ms", "kernels"}
)  # fmt: skip
VERDICT_COLUMNS = tuple(
    "id statement measured unit op threshold partly verdict datasets scope group caveat".split()
)
#: clock spread (%) past which a ratio's verdict carries a caveat
CLOCK_SHARE_PCT = 10.0


@dataclass(frozen=True)
class Rule:
    """``statement`` holds when ``fact op threshold``. ``group``: the notebook or table it files
    under; ``datasets``: its tables (empty: those the fact records)."""

    id: str
    statement: str
    fact: str
    op: str
    threshold: float
    unit: str = ""
    partly: float | None = None
    datasets: tuple[str, ...] = ()
    scope: str = ""
    group: str = ""

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"rule {self.id}: op {self.op!r} is not one of {sorted(OPS)}")
        if self.unit not in UNITS:
            raise ValueError(f"rule {self.id}: unit {self.unit!r} is not one of {sorted(UNITS)}")
        if self.partly is not None and OPS[self.op](self.partly, self.threshold):
            raise ValueError(
                f"rule {self.id}: partly {self.partly} must be looser than threshold "
                f"{self.threshold} for {self.op}"
            )

    def decide(self, measured: float) -> str:
        """The verdict for one measured value."""
        if measured is None or (isinstance(measured, float) and math.isnan(measured)):
            return NOT_TESTED
        if OPS[self.op](measured, self.threshold):
            return HOLDS
        if self.partly is not None and OPS[self.op](measured, self.partly):
            return PARTLY
        return FAILS


def _num(v: float, unit: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "not measured"
    a = abs(v)
    text = f"{v:,.0f}" if a >= 100 else f"{v:.3g}" if a >= 0.01 or a == 0 else f"{v:.2e}"
    return (
        f"{text} {unit}".strip()
        if unit not in ("x", "%")
        else f"{text}{' ' if unit == '%' else ''}{unit}"
    )


def evaluate(rules: Iterable[Rule], facts: pd.DataFrame, root: str = "") -> pd.DataFrame:
    """One row per rule with :data:`VERDICT_COLUMNS`; ``root`` prefixes bare dataset names."""
    index = {(f["key"], f["scope"]): f for f in facts.to_dict("records")}
    rows = []
    for r in rules:
        f = index.get((r.fact, r.scope), {})
        measured = f.get("value", math.nan)
        names = r.datasets or tuple(f.get("datasets", ()))
        rows.append(
            {
                "id": r.id,
                "statement": r.statement,
                "measured": float(measured),
                "unit": r.unit,
                "op": r.op,
                "threshold": float(r.threshold),
                "partly": math.nan if r.partly is None else float(r.partly),
                "verdict": r.decide(float(measured)),
                # a name with a root already (a fact over two roots) is kept as it is
                "datasets": ", ".join(f"{root}/{d}" if root and "/" not in d else d for d in names),
                "scope": r.scope,
                "group": r.group,
                "caveat": _clock_caveat(f.get("clock_spread_pct", math.nan)),
            }
        )
    return pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))


def _clock_caveat(spread_pct: float) -> str:
    if not spread_pct > CLOCK_SHARE_PCT:
        return ""
    return (
        f"its two sides ran at SM clocks {spread_pct:.0f} % apart (over {CLOCK_SHARE_PCT:g} %): "
        "part of the ratio is the clock"
    )


def frame(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The verdict table's text, indexed by rule id."""
    out = pd.DataFrame(
        {
            "statement": verdicts.statement,
            "measured": [
                f"{_num(m, u)}; {c}" if isinstance(c, str) and c else _num(m, u)
                for m, u, c in zip(
                    verdicts.measured,
                    verdicts.unit,
                    verdicts.get("caveat", pd.Series("", verdicts.index)),
                    strict=True,
                )
            ],
            "threshold": [
                f"{o} {_num(t, u)}"
                for o, t, u in zip(verdicts.op, verdicts.threshold, verdicts.unit, strict=True)
            ],
            "verdict": verdicts.verdict,
            "datasets": verdicts.datasets,
        }
    )
    out.index = verdicts.id.values
    return out


_TABLE_STYLES = [
    {"selector": "td.col0", "props": "text-align: left; white-space: normal; min-width: 24em;"},
    {"selector": "td.col4", "props": "text-align: left; white-space: normal; font-size: 0.75em;"},
    {"selector": "td.col1, td.col2, td.col3", "props": "white-space: nowrap;"},
]


def table(verdicts: pd.DataFrame):
    """The verdict table as a notebook shows it: statements whole, verdicts in badge colours."""
    styler = tables.show(frame(verdicts), index=True)
    return styler.set_table_styles(_TABLE_STYLES, overwrite=False).map(_badge, subset=["verdict"])


def _badge(verdict: str) -> str:
    bg, fg = VERDICT_COLORS.get(verdict, (None, None))
    return f"background: {bg}; color: {fg}; font-weight: 600; white-space: nowrap;" if bg else ""


def check_unique(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """``rules`` as a tuple; ValueError when two share an id, or a fact, scope and op."""
    rules = tuple(rules)
    ids = [r.id for r in rules]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"rule ids used twice: {dup}")
    seen: dict[tuple, str] = {}
    for r in rules:
        other = seen.setdefault((r.fact, r.scope, r.op), r.id)
        if other != r.id:
            raise ValueError(f"rules {other} and {r.id} both decide {r.fact} {r.op} ({r.scope})")
    return rules


def validate(rules: Iterable[Rule], facts: Iterable[str], datasets: Iterable[str]):
    """:func:`check_unique` ``rules``; ValueError naming each unknown fact or dataset read."""
    rules, facts, datasets = check_unique(rules), frozenset(facts), frozenset(datasets)
    bad = [f"{r.id}: fact {r.fact!r}" for r in rules if r.fact not in facts]
    bad += [f"{r.id}: dataset {d!r}" for r in rules for d in r.datasets if d not in datasets]
    if bad:
        raise ValueError("rules naming what no facts function or plan knows: " + "; ".join(bad))
    return rules


#: the topics' folders, each holding its ``rules.toml``
TOPICS = Path(__file__).resolve().parents[1] / "topics"
_DEFAULTS = ("group", "datasets", "scope")
_REQUIRED = ("id", "statement", "fact", "op", "threshold")


@functools.cache
def load(path: str | Path) -> tuple[Rule, ...]:
    """The rules of a TOML file: top-level ``group``, ``datasets``, ``scope`` defaults (and the
    page's ``headlines``, read by its Topic) and one ``[[rule]]`` table per rule; ValueError
    naming the file (and rule) when it is malformed."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_bytes().decode())  # TOML is UTF-8, whatever the locale
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"rules file {path}: {e}") from None
    unknown = sorted(set(doc) - {*_DEFAULTS, "rule", "headlines"})  # headlines: topics' own
    tables = doc.get("rule", [])
    if unknown or not isinstance(tables, list) or not all(isinstance(r, dict) for r in tables):
        what = f"unknown keys {unknown}" if unknown else "rule is not a list of [[rule]] tables"
        raise ValueError(f"rules file {path}: {what}")
    out = []
    for i, raw in enumerate(tables, 1):
        try:
            out.append(_rule({**{k: doc[k] for k in _DEFAULTS if k in doc}, **raw}))
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"rules file {path}, rule {i} ({raw.get('id', 'no id')}): {e}"
            ) from None
    try:
        return check_unique(out)
    except ValueError as e:
        raise ValueError(f"rules file {path}: {e}") from None


def _rule(d: dict) -> Rule:
    unknown = sorted(set(d) - {f.name for f in fields(Rule)})
    missing = [k for k in _REQUIRED if k not in d]
    if unknown or missing:
        raise ValueError(f"unknown keys {unknown}" if unknown else f"missing keys {missing}")
    for k, v in d.items():
        num = k in ("threshold", "partly")
        ok = isinstance(v, list) and all(isinstance(x, str) for x in v) if k == "datasets" else (
            isinstance(v, int | float) and not isinstance(v, bool) if num else isinstance(v, str)
        )  # fmt: skip
        if not ok:
            want = "a list of strings" if k == "datasets" else "a number" if num else "a string"
            raise TypeError(f"{k} = {v!r} is not {want}")
    d["datasets"] = tuple(d.get("datasets", ()))
    d["partly"] = None if d.get("partly") is None else float(d["partly"])
    return Rule(**{**d, "threshold": float(d["threshold"])})


def topic_rules(topic: str, file: str = "rules.toml") -> tuple[Rule, ...]:
    """The rules of ``yolo_sm/topics/<topic>/<file>`` (:func:`load`)."""
    return load(TOPICS / topic / file)

"""Every rule yolo_sm decides (article claims, goals, headline findings) and their verdicts
for one dataset root: what ``yolo-sm claims --json`` prints."""

from __future__ import annotations

import json

import pandas as pd

from yolo_sm.analyse import roofline as analyse_roofline
from yolo_sm.analyse.facts import concat
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.findings import roofline
from yolo_sm.report.rules import Rule, check_unique, evaluate

#: (rules, facts function) pairs; each facts function takes a DataRoot and returns a facts
#: table (yolo_sm.analyse.facts). Filled by the topic modules' registrations below.
SOURCES: list[tuple[tuple[Rule, ...], object]] = []


def all_rules() -> tuple[Rule, ...]:
    """Every rule, ids unique."""
    return check_unique(r for rules, _ in SOURCES for r in rules)


def facts(root: DataRoot) -> pd.DataFrame:
    """The facts every rule reads, computed from ``root``'s datasets."""
    return concat(*(fn(root) for _, fn in SOURCES))


def verdict_table(root: DataRoot) -> pd.DataFrame:
    """One row per rule: id, statement, measured, unit, op, threshold, partly, verdict,
    datasets, scope, group (:func:`yolo_sm.report.rules.evaluate`)."""
    return evaluate(all_rules(), facts(root), root.name)


def to_json(verdicts: pd.DataFrame) -> str:
    """The verdict table as a JSON list, one object per rule (NaN as null)."""
    cols = ["id", "statement", "measured", "unit", "op", "threshold", "verdict", "datasets"]
    rows = verdicts[cols].astype(object).where(verdicts[cols].notna(), None).to_dict("records")
    for r in rows:
        r["datasets"] = [d for d in (r["datasets"] or "").split(", ") if d]
    return json.dumps(rows, indent=2)


SOURCES.append((roofline.RULES, analyse_roofline.facts))

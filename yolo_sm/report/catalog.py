"""Every rule yolo_sm decides (article claims, headline findings) and their verdicts
for one dataset root: what ``yolo-sm claims --json`` prints."""

from __future__ import annotations

import json
import sys

import pandas as pd

from yolo_sm import topics
from yolo_sm.analyse.facts import concat
from yolo_sm.contract import datasets
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.rules import Rule, evaluate, topic_rules, validate

#: (rules, facts(root)) pairs of every topic
SOURCES = [(topic_rules(t.name, r), t.load(f)) for t in topics.ALL for r, f in t.sources]
#: rules over two roots side by side, with their facts function (a, b) -> facts
PAIR_SOURCES = [(topic_rules(t.name, r), t.load(f)) for t in topics.ALL for r, f in t.pair_sources]


def _keys(fn) -> frozenset[str]:  # its FACT_KEYS, else its module's
    return getattr(fn, "FACT_KEYS", None) or sys.modules[fn.__module__].FACT_KEYS


def known_facts() -> frozenset[str]:
    """The fact keys the facts functions declare."""
    return frozenset().union(*map(_keys, dict.fromkeys(fn for _, fn in SOURCES + PAIR_SOURCES)))


def all_rules() -> tuple[Rule, ...]:
    """Every rule, validated (:func:`yolo_sm.report.rules.validate`)."""
    rules = (r for rules, _ in SOURCES for r in rules)
    return validate(rules, known_facts(), datasets.known_names())


def facts(root: DataRoot, read=None) -> pd.DataFrame:
    """The facts every rule reads (or the facts functions declaring a key in ``read``)."""
    fns = [fn for fn in dict.fromkeys(fn for _, fn in SOURCES) if read is None or _keys(fn) & read]
    return concat(*map(root.facts, fns))


def verdict_table(root: DataRoot) -> pd.DataFrame:
    """One row per rule (:func:`yolo_sm.report.rules.evaluate`); ``attrs``: ``root_name`` and
    ``root_path``."""
    verdicts = evaluate(all_rules(), facts(root), root.name)
    verdicts.attrs.update(root_name=root.name, root_path=str(root.path))
    return verdicts


def topic_verdicts(name: str, root: DataRoot) -> pd.DataFrame:
    """:func:`verdict_table`'s rows for the rules of topic ``name``, from the facts they read."""
    topic = next(t for t in topics.ALL if t.name == name)
    rules = [r for file, _ in topic.sources for r in topic_rules(name, file)]
    return evaluate(rules, facts(root, {r.fact for r in rules}), root.name)


def to_json(verdicts: pd.DataFrame) -> str:
    """The verdict table as a JSON list, one object per rule (NaN as null)."""
    cols = "id statement measured unit op threshold verdict datasets caveat".split()
    rows = verdicts[cols].astype(object).where(verdicts[cols].notna(), None).to_dict("records")
    for r in rows:
        r["datasets"] = [d for d in (r["datasets"] or "").split(", ") if d]
    return json.dumps(rows, indent=2)


def pair_verdict_table(a: DataRoot, b: DataRoot) -> pd.DataFrame:
    """One row per rule over the two roots ``a`` and ``b`` (columns as :func:`verdict_table`)."""
    rules = validate(
        (r for rs, _ in PAIR_SOURCES for r in rs), known_facts(), datasets.known_names()
    )
    return evaluate(rules, concat(*(fn(a, b) for fn in dict.fromkeys(f for _, f in PAIR_SOURCES))))

"""Every rule yolo_sm decides (article claims, headline findings) and their verdicts
for one dataset root: what ``yolo-sm claims --json`` prints."""

from __future__ import annotations

import json
import sys

import pandas as pd

from yolo_sm.analyse import batch as analyse_batch
from yolo_sm.analyse import claims as analyse_claims
from yolo_sm.analyse import compare as analyse_compare
from yolo_sm.analyse import fast as analyse_fast
from yolo_sm.analyse import heatmaps as analyse_heatmaps
from yolo_sm.analyse import hosts as analyse_hosts
from yolo_sm.analyse import memory as analyse_memory
from yolo_sm.analyse import monitor as analyse_monitor
from yolo_sm.analyse import multi_gpu as analyse_multi_gpu
from yolo_sm.analyse import precision as analyse_precision
from yolo_sm.analyse import primer as analyse_primer
from yolo_sm.analyse import roofline as analyse_roofline
from yolo_sm.analyse import scaling as analyse_scaling
from yolo_sm.analyse import shapes as analyse_shapes
from yolo_sm.analyse import sharing as analyse_sharing
from yolo_sm.analyse import techniques as analyse_techniques
from yolo_sm.analyse import timeline as analyse_timeline
from yolo_sm.analyse.facts import concat
from yolo_sm.contract import datasets
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import claims
from yolo_sm.report.findings import batch as findings_batch
from yolo_sm.report.findings import compare as findings_compare
from yolo_sm.report.findings import fast, roofline
from yolo_sm.report.findings import heatmaps as findings_heatmaps
from yolo_sm.report.findings import hosts as findings_hosts
from yolo_sm.report.findings import memory as findings_memory
from yolo_sm.report.findings import monitor as findings_monitor
from yolo_sm.report.findings import multi_gpu as findings_multi_gpu
from yolo_sm.report.findings import precision as findings_precision
from yolo_sm.report.findings import primer as findings_primer
from yolo_sm.report.findings import shapes as findings_shapes
from yolo_sm.report.findings import sharing as findings_sharing
from yolo_sm.report.findings import techniques as findings_techniques
from yolo_sm.report.findings import timeline as findings_timeline
from yolo_sm.report.findings import width as findings_width
from yolo_sm.report.rules import Rule, evaluate, validate

#: (rules, facts function) pairs; each facts function takes a DataRoot and returns a facts
#: table (yolo_sm.analyse.facts). Filled by the topic modules' registrations below.
SOURCES: list[tuple[tuple[Rule, ...], object]] = []


def known_facts() -> frozenset[str]:
    """The fact keys the facts functions of :data:`SOURCES` and :data:`PAIR_SOURCES` declare
    (the function's ``FACT_KEYS``, else its module's)."""
    fns = dict.fromkeys(fn for _, fn in SOURCES + PAIR_SOURCES)
    return frozenset().union(
        *(getattr(fn, "FACT_KEYS", None) or sys.modules[fn.__module__].FACT_KEYS for fn in fns)
    )


def all_rules() -> tuple[Rule, ...]:
    """Every rule, validated (:func:`yolo_sm.report.rules.validate`): ids unique, one rule per
    fact and comparison, every fact and dataset known."""
    rules = (r for rules, _ in SOURCES for r in rules)
    return validate(rules, known_facts(), datasets.known_names())


def facts(root: DataRoot) -> pd.DataFrame:
    """The facts every rule reads, computed from ``root``'s datasets (each facts function
    once, however many rule sets read it)."""
    return concat(*(fn(root) for fn in dict.fromkeys(fn for _, fn in SOURCES)))


def verdict_table(root: DataRoot) -> pd.DataFrame:
    """One row per rule: id, statement, measured, unit, op, threshold, partly, verdict,
    datasets, scope, group (:func:`yolo_sm.report.rules.evaluate`); ``attrs``: the root's
    ``root_name`` and ``root_path``, for the pages that say what it lacks."""
    verdicts = evaluate(all_rules(), facts(root), root.name)
    verdicts.attrs.update(root_name=root.name, root_path=str(root.path))
    return verdicts


def to_json(verdicts: pd.DataFrame) -> str:
    """The verdict table as a JSON list, one object per rule (NaN as null)."""
    cols = ["id", "statement", "measured", "unit", "op", "threshold", "verdict", "datasets"]
    cols += ["caveat"]
    rows = verdicts[cols].astype(object).where(verdicts[cols].notna(), None).to_dict("records")
    for r in rows:
        r["datasets"] = [d for d in (r["datasets"] or "").split(", ") if d]
    return json.dumps(rows, indent=2)


SOURCES.append((claims.CLAIMS_RULES, analyse_claims.facts))
SOURCES.append((fast.RULES, analyse_fast.facts))
SOURCES.append((findings_primer.RULES, analyse_primer.facts))
SOURCES.append((findings_heatmaps.RULES, analyse_heatmaps.facts))
SOURCES.append((findings_width.RULES, analyse_scaling.facts))
SOURCES.append((findings_precision.RULES, analyse_precision.facts))
SOURCES.append((findings_batch.RULES, analyse_batch.facts))
SOURCES.append((findings_timeline.RULES, analyse_timeline.facts))
SOURCES.append((roofline.RULES, analyse_roofline.facts))
SOURCES.append((findings_hosts.RULES, analyse_hosts.facts))
SOURCES.append((findings_techniques.RULES, analyse_techniques.facts))
SOURCES.append((findings_memory.RULES, analyse_memory.facts))
SOURCES.append((findings_sharing.RULES, analyse_sharing.facts))
SOURCES.append((findings_monitor.RULES, analyse_monitor.facts))

#: rules over two roots side by side (notebook 12), with their facts function (a, b) -> facts
PAIR_SOURCES: list[tuple[tuple[Rule, ...], object]] = []


def pair_verdict_table(a: DataRoot, b: DataRoot) -> pd.DataFrame:
    """One row per rule over the two roots ``a`` and ``b`` (columns as :func:`verdict_table`)."""
    rules = validate(
        (r for rs, _ in PAIR_SOURCES for r in rs), known_facts(), datasets.known_names()
    )
    return evaluate(rules, concat(*(fn(a, b) for fn in dict.fromkeys(f for _, f in PAIR_SOURCES))))


PAIR_SOURCES.append((findings_compare.RULES, analyse_compare.facts))
# a root collected on several GPUs of a host against one collected on one of them
PAIR_SOURCES.append((findings_multi_gpu.RULES, analyse_multi_gpu.facts))
SOURCES.append((findings_shapes.RULES, analyse_shapes.facts))

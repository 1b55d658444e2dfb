"""Notebook 12's rules over two roots' pair facts, and both roots' verdicts side by side."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.rules import Rule, check_unique, evaluate
from yolo_sm.topics.compare import analyse as compare
from yolo_sm.topics.compare.analyse import AGREE_PCT, PREFIX

G = "12_two_machines"
#: two collections agree when this share of their shared points (%) is within AGREE_PCT
AGREE_SHARE_PCT = 95.0

# fmt: off
RULES: tuple[Rule, ...] = check_unique([
    Rule("compare_gpu_bound_agree", f"The two collections agree within {AGREE_PCT:g} % on the "
         f"GPU-bound points both measured (img/s, at least {AGREE_SHARE_PCT:g} % of them)",
         PREFIX + "gpu_bound_within_pct", ">=", AGREE_SHARE_PCT, "%", partly=75.0, group=G),
    Rule("compare_host_bound_gpu_work_agree", f"On the host-bound points both measured (eager at "
         f"small batch) the GPU's busy time per forward, which no host changes, agrees within "
         f"{AGREE_PCT:g} % (at least {AGREE_SHARE_PCT:g} % of them)",
         PREFIX + "host_bound_gpu_busy_within_pct", ">=", AGREE_SHARE_PCT, "%", partly=75.0,
         group=G),
    Rule("compare_b_faster", "Machine b delivers more img/s than machine a at every GPU-bound "
         "point both measured", PREFIX + "b_faster_share_pct", ">=", 100.0, "%", partly=50.0,
         group=G),
])
# fmt: on


def verdicts(a: DataRoot, b: DataRoot, points: pd.DataFrame | None = None) -> pd.DataFrame:
    """The verdict table of :data:`RULES` for ``a`` against ``b``, naming both roots' sweeps."""
    f = compare.facts(a, b, points)
    out = evaluate(RULES, f, "")
    ds = {k: ", ".join(d) for k, d in zip(f.key, f.datasets, strict=True)}
    out["datasets"] = [ds.get(r.fact, "") for r in RULES]
    return out


def side_by_side(va: pd.DataFrame, vb: pd.DataFrame, a: str = "a", b: str = "b") -> pd.DataFrame:
    """Two verdict tables joined on the rule, measured and verdict per side and ``agree``; a
    rule tested on neither is left out (``attrs["dropped"]`` counts them)."""
    cols = ["id", "statement", "unit", "measured", "verdict"]
    m = va[cols].merge(
        vb[["id", "measured", "verdict"]], on="id", how="outer", suffixes=("_a", "_b")
    )
    m["statement"] = m["statement"].fillna(m["id"])
    for side in ("a", "b"):
        m[f"verdict_{side}"] = m[f"verdict_{side}"].fillna("absent")
    untested = ("not tested", "absent")
    idle = m["verdict_a"].isin(untested) & m["verdict_b"].isin(untested)
    out = m[~idle].assign(agree=m["verdict_a"] == m["verdict_b"])
    sides = (("a", a), ("b", b))
    names = {f"{c}_{s}": f"{c} {s} ({n})" for c in ("measured", "verdict") for s, n in sides}
    order = ["statement", "measured_a", "verdict_a", "measured_b", "verdict_b", "unit", "agree"]
    out = out.set_index("id")[order].rename(columns=names)
    out.attrs["dropped"] = int(idle.sum())
    return out

"""Findings of collecting on several GPUs of one host (notebook 03's last section): rules over
the pair facts of :func:`yolo_sm.topics.batch.multi_gpu.pair_facts`, a multi-GPU root against a
one-GPU root of the same plan steps."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.schema import COLLECT_TASKS
from yolo_sm.report.rules import Rule, check_unique, evaluate
from yolo_sm.topics.batch import multi_gpu
from yolo_sm.topics.batch.multi_gpu import PREFIX

GROUP = "03_batch_sweep"
#: scaling efficiency (speed-up / N) that counts as scaling well, and as scaling partly
EFFICIENCY, EFFICIENCY_PARTLY = 0.8, 0.6
#: how far apart the GPUs' median ratios may be (%) for the GPUs to measure alike
ALIKE_PCT, ALIKE_PARTLY_PCT = 3.0, 5.0

RULES: tuple[Rule, ...] = check_unique(
    [
        Rule(
            id="multi_gpu_scales",
            statement=f"Collecting on N GPUs of the host takes at most 1/({EFFICIENCY:g} N) of "
            "one GPU's wall time (speed-up over N, the scaling efficiency)",
            fact=PREFIX + "scaling_efficiency",
            op=">=",
            threshold=EFFICIENCY,
            partly=EFFICIENCY_PARTLY,
            datasets=(COLLECT_TASKS,),
            group=GROUP,
        ),
        Rule(
            id="multi_gpu_alike",
            statement="The host's GPUs measure alike: per GPU, the median ratio of its points to "
            f"the same points on one GPU lies within {ALIKE_PCT:g} % of every other GPU's "
            "(host-bound points left out)",
            fact=PREFIX + "gpu_median_spread_pct",
            op="<=",
            threshold=ALIKE_PCT,
            partly=ALIKE_PARTLY_PCT,
            unit="%",
            group=GROUP,
        ),
        Rule(
            id="multi_gpu_same_tables",
            statement="The tables merged from the GPUs hold the same rows as the one-GPU run's "
            "(key columns and status of every table both hold)",
            fact=PREFIX + "table_mismatches",
            op="<=",
            threshold=0.0,
            group=GROUP,
        ),
    ]
)


def verdicts(multi: DataRoot | None, single: DataRoot | None) -> pd.DataFrame:
    """The rules' verdicts for ``multi`` against ``single`` ("not tested" without both)."""
    found = (
        multi_gpu.pair_facts(multi, single)
        if multi is not None and single is not None
        else facts_table([])
    )
    name = multi.name if multi is not None else ""
    return evaluate(RULES, found, name)

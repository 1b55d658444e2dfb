"""Findings of the two-models notebook (17), as rules over the facts of
:func:`yolo_sm.topics.sharing.analyse.facts`."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.rules import Rule, check_unique, evaluate, rule_maker
from yolo_sm.topics.sharing import analyse as sharing
from yolo_sm.topics.sharing.analyse import scope

BIG_SMALL = "1x16+0.25x1"
EQUAL = "0.5x16+0.5x16"
TABLE = (sharing.DATASET,)
KERNELS = (sharing.KERNELS,)
#: a pair's summed img/s over its faster engine alone that counts as "sharing pays"
TOTAL_GAIN = 1.2
#: how much a small model's p99 latency may grow beside the big one
P99_GROWTH = 2.0
#: work done together (each engine's together img/s over its alone img/s, summed) that beats
#: running the two one after the other
WORK_GAIN = 1.1
#: share of the small model's kernel time that runs beside the big model's kernels
OVERLAP = 0.5
#: summed img/s of two streams over two processes that counts as "streams share better"
STREAMS_OVER_PROCESSES = 1.1


_make = rule_maker("sharing", "17_two_models")


def _finding(fid, statement, key, op, threshold, unit, datasets, sc, partly=None) -> Rule:
    return _make(fid, statement, f"sharing.{key}", op, threshold, unit, datasets, partly, sc)


#: One rule per headline finding of notebook 17.
RULES: tuple[Rule, ...] = check_unique(
    (
        _finding(
            "streams_total",
            f"On two streams of one process, width 1.0 batch 16 beside width 0.25 batch 1 "
            f"deliver at least {TOTAL_GAIN:g}x the img/s of the faster engine alone (the small "
            "model fills SMs the big one leaves idle)",
            "sum_over_best_alone",
            ">=",
            TOTAL_GAIN,
            "x",
            TABLE,
            scope(BIG_SMALL, "streams"),
            partly=1.0,
        ),
        _finding(
            "processes_total",
            f"In two processes (no MPS) the same pair still delivers at least {TOTAL_GAIN:g}x "
            "the img/s of the faster engine alone",
            "sum_over_best_alone",
            ">=",
            TOTAL_GAIN,
            "x",
            TABLE,
            scope(BIG_SMALL, "processes"),
            partly=1.0,
        ),
        _finding(
            "small_p99_streams",
            f"The small model's p99 batch latency grows at most {P99_GROWTH:g}x when it shares "
            "the GPU with the big one on two streams",
            "p99_inflation",
            "<=",
            P99_GROWTH,
            "x",
            TABLE,
            scope(BIG_SMALL, "streams", "b"),
            partly=2 * P99_GROWTH,
        ),
        _finding(
            "small_p99_processes",
            f"The small model's p99 batch latency grows at most {P99_GROWTH:g}x when it shares "
            "the GPU with the big one from another process",
            "p99_inflation",
            "<=",
            P99_GROWTH,
            "x",
            TABLE,
            scope(BIG_SMALL, "processes", "b"),
            partly=2 * P99_GROWTH,
        ),
        _finding(
            "equal_work_streams",
            f"Two width-0.5 batch-16 engines on two streams do at least {WORK_GAIN:g}x the work "
            "of running them one after the other (each engine's together img/s over its alone "
            "img/s, summed)",
            "work_done",
            ">=",
            WORK_GAIN,
            "x",
            TABLE,
            scope(EQUAL, "streams"),
            partly=1.0,
        ),
        _finding(
            "small_overlaps_big",
            f"On two streams at least {OVERLAP:.0%} of the small model's kernel time runs while "
            "a kernel of the big model runs too (kernels of both share the SMs)",
            "overlap_share",
            ">=",
            OVERLAP,
            "",
            KERNELS,
            scope(BIG_SMALL, "streams", "b"),
        ),
        _finding(
            "streams_beat_processes",
            f"Two streams of one process deliver at least {STREAMS_OVER_PROCESSES:g}x the summed "
            "img/s of two processes for the big and small pair (without MPS, processes take "
            "turns on the GPU)",
            "streams_over_processes",
            ">=",
            STREAMS_OVER_PROCESSES,
            "x",
            TABLE,
            f"pair={BIG_SMALL}",
            partly=1.0,
        ),
    )
)


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The findings' verdict table for ``root``."""
    return evaluate(RULES, sharing.facts(root), root.name)


def verdicts_of(table: pd.DataFrame, kernels: pd.DataFrame | None = None) -> pd.DataFrame:
    """The verdicts of a ``sharing`` table (and its kernel classes) held in memory."""
    rows = [r for r in sharing.sharing_facts(table, kernels) if r["value"] == r["value"]]
    return evaluate(RULES, facts_table(rows))

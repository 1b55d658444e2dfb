"""The speed goals at a glance (yolo_sm.report.goals.goal_status): a goal is met when every rule
that decides it holds, missed when one does not, not decided while some are not tested; the
rules that only explain a verdict do not count."""

from __future__ import annotations

import pandas as pd
import pytest

from yolo_sm.report import goals
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY


def _verdicts(verdict: str = HOLDS, **override) -> pd.DataFrame:
    """Every rule of the targets and the speed goals, and goal 4's, with ``verdict``, except
    the ids in ``override``."""
    ids = [r.id for r in goals.RULES + goals.SPEED_RULES + goals.COLLECTION_RULES]
    return pd.DataFrame({"id": ids, "verdict": [override.get(i, verdict) for i in ids]})


def _status(v: pd.DataFrame) -> pd.Series:
    return goals.goal_status(v).set_index("goal")["status"]


def test_every_goal_is_met_when_its_criteria_hold():
    s = goals.goal_status(_verdicts()).set_index("goal")
    assert s.status.tolist() == [goals.MET] * 4
    assert (s.hold == s.criteria).all() and (s.missed == 0).all() and (s.not_tested == 0).all()


@pytest.mark.parametrize("verdict, status", [(FAILS, goals.MISSED), (PARTLY, goals.MISSED),
                                             (NOT_TESTED, goals.OPEN)])  # fmt: skip
def test_one_criterion_decides_its_goal_alone(verdict, status):
    s = _status(_verdicts(**{"speed_2_w1.5": verdict}))
    assert s[2] == status and s[1] == s[3] == s[4] == goals.MET


def test_a_miss_outweighs_untested_criteria_and_explaining_rules_do_not_count():
    s = _status(_verdicts(**{"speed_3_w1": FAILS, "speed_3_warm_build_w2": NOT_TESTED}))
    assert s[3] == goals.MISSED
    explaining = {"speed_2_convs_fit_w1": FAILS, "speed_3_gap_in_spread_w2": FAILS}
    assert _status(_verdicts(**explaining)).tolist() == [goals.MET] * 4


def test_goal_1_counts_the_target_that_holds_its_predict_rule_and_absent_rules_are_untested():
    assert "goal_4_predict" in goals.GOAL_CRITERIA[1]
    assert _status(_verdicts(goal_4_predict=FAILS))[1] == goals.MISSED
    only_speed = _verdicts()
    only_speed = only_speed[only_speed.id != "speed_4"]  # no baseline root: goal 4 undecided
    assert _status(only_speed)[4] == goals.OPEN


def test_the_shipped_root_reads_every_goal():
    from yolo_sm.contract.datasets import open_root

    s = goals.goals_of(open_root("h200"))
    assert s.goal.tolist() == [1, 2, 3, 4]
    assert (s.hold + s.missed + s.not_tested == s.criteria).all()
    assert s.set_index("goal").status[4] == goals.OPEN  # goal 4 needs a baseline root


def test_each_goal_is_decided_by_its_own_rules():
    """The criteria per goal, spelled out from the goals' widths and batches: a renamed or a new
    rule that would change them fails here."""
    g1 = {f"speed_1_w{w:g}_b{b}" for w in goals.PIPELINE_WIDTHS for b in goals.PIPELINE_BATCHES}
    g1 |= {
        f"speed_1_predict_w{w:g}_b{b}"
        for w in goals.PIPELINE_WIDTHS
        for b in goals.PIPELINE_BATCHES
        if (w, b) != (0.5, 16)
    } | {"goal_4_predict"}
    g3 = {f"speed_3_{k}w{w:g}" for w in goals.STOCK_WIDTHS for k in ("", "warm_build_")}
    want = {1: g1, 2: {f"speed_2_w{w:g}" for w in goals.EIGHT_BIT_WIDTHS}, 3: g3, 4: {"speed_4"}}
    assert {g: set(ids) for g, ids in goals.GOAL_CRITERIA.items()} == want

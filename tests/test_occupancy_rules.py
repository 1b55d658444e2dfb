"""Every rule of the primer, width and heatmaps notebooks flips its verdict when its fact crosses
the threshold (and reads "partly" between threshold and ``partly`` where it has one)."""

import pytest

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.report import rules
from yolo_sm.report.rules import topic_rules

RULES = [*topic_rules("primer"), *topic_rules("width"), *topic_rules("heatmaps")]
EPS = 1e-6


def verdict(rule, measured):
    f = facts_table([fact(rule.fact, measured, rule.unit, scope=rule.scope)])
    return rules.evaluate([rule], f).verdict.iloc[0]


def outward(rule, x, step):
    """``x`` moved by ``step`` away from holding (down for >=/>, up for <=/<)."""
    return x - step if rule.op in (">=", ">") else x + step


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_flips_across_its_threshold(rule):
    at = rule.threshold if rule.op in (">=", "<=") else outward(rule, rule.threshold, -EPS)
    assert verdict(rule, at) == rules.HOLDS
    just_out = outward(rule, rule.threshold, EPS if rule.op in (">=", "<=") else 0.0)
    far_out = outward(rule, rule.partly if rule.partly is not None else rule.threshold, 1.0)
    if rule.partly is not None:
        assert verdict(rule, just_out) == rules.PARTLY
    else:
        assert verdict(rule, just_out) == rules.FAILS
    assert verdict(rule, far_out) == rules.FAILS
    assert verdict(rule, float("nan")) == rules.NOT_TESTED


def test_rule_ids_unique_and_grouped():
    rules.check_unique(RULES)
    assert {r.group for r in topic_rules("primer")} == {"00_occupancy_primer"}
    assert {r.group for r in topic_rules("heatmaps")} == {"04_occupancy_heatmaps"}
    assert {r.group for r in topic_rules("width")} == {"01_width_scaling"}

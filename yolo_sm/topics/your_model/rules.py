"""Notebook 11's rules, and the rules of notebooks 03 and 05 one model's tables decide."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from yolo_sm.analyse.facts import concat
from yolo_sm.report.rules import Rule, check_unique, evaluate, validate
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.batch import rules as batch_rules
from yolo_sm.topics.heatmaps.analyse import LOW_PCT
from yolo_sm.topics.timeline import analyse as timeline
from yolo_sm.topics.timeline import rules as timeline_rules
from yolo_sm.topics.your_model import analyse as your_model
from yolo_sm.topics.your_model.analyse import PREFIX, ModelView

G = "11_your_model"

# fmt: off
RULES: tuple[Rule, ...] = check_unique([
    Rule("your_model_half_idle_warps", "Over its forward at the largest profiled batch, the "
         "model keeps under half of the SMs' warp slots busy (time-weighted achieved "
         "occupancy, Nsight Compute)", PREFIX + "achieved_occupancy_tw_pct", "<", 50.0, "%",
         partly=60.0, group=G),
    Rule("your_model_low_layers_dominate", f"Layers under {LOW_PCT:g} % achieved occupancy hold "
         "most of the forward's kernel time (largest profiled batch, Nsight Compute)",
         PREFIX + "time_share_below_50_pct", ">=", 50.0, "%", partly=25.0, group=G),
    Rule("your_model_one_layer_dominates", "One layer holds at least a quarter of the forward's "
         "kernel time (largest profiled batch, Nsight Compute)",
         PREFIX + "slowest_layer_time_share_pct", ">=", 25.0, "%", partly=15.0, group=G),
])
# fmt: on
validate(RULES, your_model.FACT_KEYS, ())

#: the roles the borrowed rules' datasets stand for (a rule reading another dataset is left out)
ROLE_OF = {batch.SWEEP: "sweep", batch.NCU: "ncu", timeline.TRACE: "trace"}


def rules_for(v: ModelView) -> tuple[Rule, ...]:
    """Notebooks 03's and 05's rules over the view's sources, and :data:`RULES`."""
    borrowed = [
        replace(r, datasets=tuple(v.sources.get(ROLE_OF[d], ROLE_OF[d]) for d in r.datasets))
        for r in (*batch_rules.RULES, *timeline_rules.RULES)
        if r.datasets and all(d in ROLE_OF for d in r.datasets)
    ]
    return check_unique((*borrowed, *RULES))


def facts(v: ModelView) -> pd.DataFrame:
    """Every fact :func:`rules_for` reads, off the view's role-named datasets."""
    return concat(
        batch.facts(v, sweep="sweep", sweep_1280="", pool_sweep="", ncu="ncu"),
        timeline.facts(v, gpm_batch="", gpm_width="", trace="trace", sweep="sweep", overhead=""),
        your_model.facts(v),
    )


def verdicts(v: ModelView) -> pd.DataFrame:
    """The verdict table of the view."""
    return evaluate(rules_for(v), facts(v), v.name)

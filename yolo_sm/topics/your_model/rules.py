"""Findings of notebook 11 (your model): the batch and timeline rules of notebooks 03 and 05
that one model's sweep, trace and Nsight Compute table can decide, pointed at the datasets
the view found, and per-layer occupancy rules over
:func:`yolo_sm.topics.your_model.analyse.facts`."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from yolo_sm.analyse.facts import concat
from yolo_sm.report.rules import Rule, check_unique, evaluate
from yolo_sm.topics.batch import analyse as analyse_batch
from yolo_sm.topics.batch import rules as findings_batch
from yolo_sm.topics.heatmaps.analyse import LOW_PCT
from yolo_sm.topics.timeline import analyse as analyse_timeline
from yolo_sm.topics.timeline import rules as findings_timeline
from yolo_sm.topics.your_model import analyse as your_model
from yolo_sm.topics.your_model.analyse import PREFIX, ModelView

GROUP = "11_your_model"

#: per-layer occupancy of one model's forward (scope empty; the config is the fact's note)
RULES: tuple[Rule, ...] = check_unique(
    [
        Rule(
            id="your_model_half_idle_warps",
            statement="Over its forward, the model keeps under half of the SMs' warp slots "
            "busy (time-weighted achieved occupancy)",
            fact=PREFIX + "achieved_occupancy_tw_pct",
            op="<",
            threshold=50.0,
            partly=60.0,
            unit="%",
            datasets=("ncu",),
            group=GROUP,
        ),
        Rule(
            id="your_model_low_layers_dominate",
            statement=f"Layers under {LOW_PCT:g} % achieved occupancy hold most of the "
            "forward's kernel time",
            fact=PREFIX + "time_share_below_50_pct",
            op=">=",
            threshold=50.0,
            partly=25.0,
            unit="%",
            datasets=("ncu",),
            group=GROUP,
        ),
        Rule(
            id="your_model_grid_limited",
            statement="Most of the forward's kernel time runs in layers whose grids leave SMs "
            "without a full wave (main limiter: grid)",
            fact=PREFIX + "grid_limited_time_share_pct",
            op=">=",
            threshold=50.0,
            partly=25.0,
            unit="%",
            datasets=("ncu",),
            group=GROUP,
        ),
        Rule(
            id="your_model_one_layer_dominates",
            statement="One layer holds at least a quarter of the forward's kernel time",
            fact=PREFIX + "slowest_layer_time_share_pct",
            op=">=",
            threshold=25.0,
            partly=15.0,
            unit="%",
            datasets=("ncu",),
            group=GROUP,
        ),
    ]
)

#: the roles the borrowed rules' datasets stand for (a rule naming another dataset, e.g. a
#: GPM timeline or the 1280 px sweep, is left out: a one-model plan does not collect it)
ROLE_OF = {
    analyse_batch.SWEEP: "sweep",
    analyse_batch.NCU: "ncu",
    analyse_timeline.TRACE: "trace",
}


def borrowed(v: ModelView) -> tuple[Rule, ...]:
    """The rules of notebooks 03 and 05 whose every dataset is one of :data:`ROLE_OF`, their
    datasets renamed to the view's sources (rules of a role the view lacks keep the role's
    name and read "not tested")."""
    out = []
    for r in (*findings_batch.RULES, *findings_timeline.RULES):
        if r.datasets and all(d in ROLE_OF for d in r.datasets):
            names = tuple(v.sources.get(ROLE_OF[d], ROLE_OF[d]) for d in r.datasets)
            out.append(replace(r, datasets=names))
    return tuple(out)


def own(v: ModelView) -> tuple[Rule, ...]:
    """:data:`RULES` with the view's Nsight Compute source as their dataset."""
    name = v.sources.get("ncu", "ncu")
    return tuple(replace(r, datasets=(name,)) for r in RULES)


def facts(v: ModelView) -> pd.DataFrame:
    """Every fact the rules of :func:`rules_for` read, off the view's role-named datasets."""
    none = ""  # a dataset name no root holds: the topic leaves those facts out
    return concat(
        analyse_batch.facts(
            v, sweep="sweep", sweep_1280=none, pool_sweep=none, ncu="ncu", gpm=none
        ),
        analyse_timeline.facts(
            v, gpm_batch=none, gpm_width=none, trace="trace", sweep="sweep", overhead=none
        ),
        your_model.facts(v),
    )


def rules_for(v: ModelView) -> tuple[Rule, ...]:
    return check_unique((*borrowed(v), *own(v)))


def verdicts(v: ModelView) -> pd.DataFrame:
    """The verdict table of the view (:func:`yolo_sm.report.rules.evaluate`)."""
    return evaluate(rules_for(v), facts(v), v.name)

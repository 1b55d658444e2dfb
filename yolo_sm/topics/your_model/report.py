"""Notebook 11's sections over a :class:`~yolo_sm.topics.your_model.analyse.ModelView`: tables
and figures, or one sentence where the view lacks a role."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from yolo_sm.analyse.facts import concat
from yolo_sm.report import plots
from yolo_sm.report.rules import Rule, check_unique, evaluate, topic_rules
from yolo_sm.report.tables import code, md
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.heatmaps import analyse as heatmaps
from yolo_sm.topics.heatmaps import report as heatmaps_plots
from yolo_sm.topics.timeline import analyse as timeline
from yolo_sm.topics.your_model import analyse as your_model
from yolo_sm.topics.your_model.analyse import ModelView

# fmt: off


def about(v: ModelView) -> str:
    """One Markdown line: the model shown, the machine, and the other models the root holds."""
    if not v.model:
        roles = ", ".join(your_model.ROLES)
        return (
            f"{plots.about(v.base)} It holds no table that names a model ({roles}): the "
            "notebook's live collection (LIVE = True on a GPU, with MODEL set) makes them."
        )
    others = f" The root also holds {len(v.others)} other models (set `MODEL` to one of: " + (
        ", ".join(code(m) for m in v.others) + ")." if v.others else ""
    )
    return f"Model **{md(v.model)}**. {plots.about(v.base)}" + (others if v.others else "")


def occupancy(v: ModelView) -> list:
    """Per-layer occupancy from the view's ncu table: summary per batch, heatmap and limiter."""
    if not v.has("ncu"):
        return [v.missing("ncu"), *trace_occupancy(v)]
    k = v.load("ncu")
    if "layer" not in k:
        return [f"The Nsight Compute table {v.sources['ncu']} attributes no kernel to a layer."]
    t = heatmaps.layer_table(k)
    both = ("achieved_occupancy_tw_pct", "theoretical_occupancy_tw_pct")
    gpu = v.device_name()
    return [
        heatmaps.config_summary(t, by="batch").round(2),
        heatmaps_plots.plot_layer_heatmap(
            t, both, x="batch", title=f"Occupancy per layer, {v.model} ({gpu})"
        ),
        heatmaps_plots.plot_limiter_heatmap(
            t, x="batch", title=f"Main limiter per layer, {v.model} ({gpu})"
        ),
    ]


def channels(v: ModelView) -> list:
    """The channel / activation table and a bar per layer of activation MB per image."""
    if not v.has("model_layers"):
        return [v.missing("model_layers")]
    t = your_model.channel_table(v.load("model_layers"))
    out = [t.round(3)]
    if "activation_mb" in t:
        out.append(
            plots.plot_bars(
                t, x="layer", y="activation_mb",
                color="module_type" if "module_type" in t else None,
                title=f"Output activation per layer and image, MB ({v.model})",
            )
        )
    return out


def trace_occupancy(v: ModelView) -> list:
    """Without an ncu table: per-layer occupancy from the trace's launch configurations."""
    if not v.has("trace"):
        return []
    t = your_model.trace_layers(v.load("trace"))
    if t.empty:
        return [f"The trace {v.sources['trace']} attributes no kernel to a layer."]
    config = t["config"].iloc[-1]
    one = t[t["config"] == config]
    long = one.melt(
        id_vars=["layer"], value_vars=["theoretical_occupancy_tw_pct", "est_occupancy_tw_pct"],
        var_name="occupancy", value_name="pct",
    )
    long["occupancy"] = long["occupancy"].map(
        {"theoretical_occupancy_tw_pct": "theoretical", "est_occupancy_tw_pct": "Kineto estimate"}
    )
    title = f"Occupancy per layer from the trace's launches, {config} ({v.device_name()})"
    return [
        f"Per layer from the trace ({v.sources['trace']}): occupancy the launch configurations "
        "allow, not a measurement of the warps resident.",
        one.round(2),
        plots.plot_bars(long, x="layer", y="pct", color="occupancy", title=title),
    ]


#: the roles the borrowed rules' datasets stand for (a rule reading another dataset is left out)
ROLE_OF = {batch.SWEEP: "sweep", batch.NCU: "ncu", timeline.TRACE: "trace"}


def rules_for(v: ModelView) -> tuple[Rule, ...]:
    """Notebooks 03's and 05's rules over the view's sources, and the topic's own rules."""
    borrowed = [
        replace(r, datasets=tuple(v.sources.get(ROLE_OF[d], ROLE_OF[d]) for d in r.datasets))
        for r in (*topic_rules("batch"), *topic_rules("timeline"))
        if r.datasets and all(d in ROLE_OF for d in r.datasets)
    ]
    return check_unique((*borrowed, *topic_rules("your_model")))


def _facts(v: ModelView) -> pd.DataFrame:
    """Every fact :func:`rules_for` reads, off the view's role-named datasets."""
    return concat(
        batch.facts(v, sweep="sweep", sweep_1280="", pool_sweep="", ncu="ncu"),
        timeline.facts(v, gpm_batch="", gpm_width="", trace="trace", sweep="sweep", overhead=""),
        your_model.facts(v),
    )


def verdicts(v: ModelView) -> pd.DataFrame:
    """The verdict table of the view."""
    return evaluate(rules_for(v), _facts(v), v.name)

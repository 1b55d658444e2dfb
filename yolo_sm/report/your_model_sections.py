"""The sections of notebook 10 (your model), one call each, over a
:class:`yolo_sm.analyse.your_model.ModelView`: what a cell shows, in order (tables, figures),
or one sentence where the view has no table of that role. The sweep and trace sections are
notebook 03's and 05's (:mod:`yolo_sm.report.batch_sections`), read through the view."""

from __future__ import annotations

from yolo_sm.analyse import heatmaps, your_model
from yolo_sm.analyse.your_model import ModelView
from yolo_sm.report import heatmaps_plots, plots


def about(v: ModelView) -> str:
    """One Markdown line: the model shown, the root's machine, and the other models it holds."""
    others = f" The root also holds {len(v.others)} other models (set `MODEL` to one of: " + (
        ", ".join(f"`{m}`" for m in v.others) + ")." if v.others else ""
    )
    return f"Model **{v.model}**. {plots.about(v.base)}" + (others if v.others else "")


def occupancy(v: ModelView) -> list:
    """Per-layer occupancy from the view's Nsight Compute table: the forward's summary per
    batch, the achieved / theoretical heatmap (layer x batch) and the main limiter per layer."""
    if not v.has("ncu"):
        return [v.missing("ncu")]
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
    """The channel / activation table (:func:`yolo_sm.analyse.your_model.channel_table`) and
    a bar per layer of its output activation per image."""
    if not v.has("model_layers"):
        return [v.missing("model_layers")]
    t = your_model.channel_table(v.load("model_layers"))
    out = [t.round(3)]
    if "activation_mb" in t:
        out.append(
            plots.plot_bars(
                t,
                x="layer",
                y="activation_mb",
                color="module_type" if "module_type" in t else None,
                title=f"Output activation per layer and image, MB ({v.model})",
            )
        )
    return out

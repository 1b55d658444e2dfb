"""Figures of the activation-memory sections of notebook 07: the live set over a forward per
model and the caching allocator's pool over a run of changing batch sizes."""

from __future__ import annotations

import plotly.graph_objects as go

from yolo_sm.report.colors import ALLOC_CONF_COLORS, OTHER_COLOR, TEMPLATE, width_color
from yolo_sm.report.style import finish
from yolo_sm.topics.memory.analyse import model_label

MB = 1e6
GB = 1e9


def _model_color(label: str) -> str:
    if " w" in label:
        try:
            return width_color(float(label.rsplit(" w", 1)[1]))
        except ValueError:
            return OTHER_COLOR
    return OTHER_COLOR


def plot_live_set(curves, *, title=None):
    """Steps: activation MB live at every op step of the forward, one colour per model (of
    :func:`yolo_sm.topics.memory.analyse.op_curves`); solid: freed at last use, dotted: as eager
    PyTorch released them. Hover names the layer that ran."""
    fig = go.Figure()
    for label, g in curves.groupby("label", sort=False):
        color = _model_color(str(label))
        for col, dash, what in (
            ("planned_bytes", "solid", "freed at last use"),
            ("eager_bytes", "dot", "as eager PyTorch freed them"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=g.step,
                    y=g[col] / MB,
                    mode="lines",
                    line={"shape": "hv", "dash": dash, "color": color},
                    name=f"{label}: {what}",
                    legendgroup=str(label),
                    customdata=g.layer,
                    hovertemplate=f"{label}<br>op %{{x}} in %{{customdata}}<br>"
                    f"%{{y:.1f}} MB live ({what})<extra></extra>",
                )
            )
    fig.update_layout(
        template=TEMPLATE,
        title=title or "Activation memory live over one forward",
        xaxis_title="op step of the forward (ATen ops in order)",
        yaxis_title="live activations (MB)",
    )
    return finish(fig)


def plot_layer_live(layer_curves, *, title=None):
    """Lines: activation MB live after each layer per model, from the lifetimes (planned and
    eager) and, where a GPU measured it, the allocator's own count (markers)."""
    fig = go.Figure()
    for label, g in layer_curves.groupby("label", sort=False):
        color = _model_color(str(label))
        series = [("planned_bytes", "solid", "lines", "layer outputs to their last consumer")]
        series.append(("eager_bytes", "dot", "lines", "layer outputs until released"))
        if g.measured_bytes.notna().any():
            series.append(("measured_bytes", "solid", "markers", "allocated (measured)"))
        for col, dash, mode, what in series:
            fig.add_trace(
                go.Scatter(
                    x=g["index"],
                    y=g[col] / MB,
                    mode=mode,
                    line={"dash": dash, "color": color, "shape": "hv"},
                    marker={"color": color, "size": 6},
                    name=f"{label}: {what}",
                    legendgroup=str(label),
                    customdata=g[["layer", "module_type"]].to_numpy(),
                    hovertemplate=f"{label}<br>after %{{customdata[0]}} (%{{customdata[1]}})"
                    f"<br>%{{y:.1f}} MB ({what})<extra></extra>",
                )
            )
    fig.update_layout(
        template=TEMPLATE,
        title=title or "Memory held after each layer",
        xaxis_title="layer (position in forward order)",
        yaxis_title="bytes held beyond the weights and input (MB)",
    )
    return finish(fig)


def plot_pool(pool, *, title=None):
    """Reserved (solid) and peak allocated during each forward (dotted) GB over the forwards
    of a pool run, one colour per allocator configuration; hover gives the batch."""
    fig = go.Figure()
    for conf, g in pool.sort_values("step").groupby("alloc_conf", sort=False):
        color = ALLOC_CONF_COLORS.get(str(conf), OTHER_COLOR)
        for col, dash, what in (
            ("reserved_bytes", "solid", "reserved"),
            ("peak_allocated_bytes", "dot", "peak allocated in the forward"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=g.step,
                    y=g[col] / GB,
                    mode="lines",
                    line={"dash": dash, "color": color},
                    name=f"{conf}: {what}",
                    legendgroup=str(conf),
                    customdata=g.batch,
                    hovertemplate=f"{conf}<br>forward %{{x}}, batch %{{customdata}}<br>"
                    f"%{{y:.2f}} GB {what}<extra></extra>",
                )
            )
    fig.update_layout(
        template=TEMPLATE,
        title=title or "Caching allocator over a run of random batch sizes",
        xaxis_title="forward in the run",
        yaxis_title="GPU memory (GB)",
    )
    return finish(fig)


__all__ = ["model_label", "plot_layer_live", "plot_live_set", "plot_pool"]

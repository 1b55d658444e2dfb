"""Figures of notebook 07: the live set over a forward per model and the allocator's pool over a
run."""

from __future__ import annotations

import plotly.graph_objects as go

from yolo_sm.report.colors import ALLOC_CONF_COLORS, OTHER_COLOR, TEMPLATE, width_color
from yolo_sm.report.style import finish


def _color(label: str) -> str:
    width = label.rsplit(" w", 1)[1] if " w" in label else ""
    return width_color(float(width)) if width.replace(".", "", 1).isdigit() else OTHER_COLOR


def _lines(df, x, series, by, colors, scale, unit, title, xaxis, yaxis, shape="hv"):
    """One trace per group of ``by`` and entry of ``series`` ((column, dash, mode, what))."""
    fig = go.Figure()
    for key, g in df.groupby(by, sort=False):
        for col, dash, mode, what in series:
            if g[col].notna().any():
                fig.add_trace(go.Scatter(
                    x=g[x], y=g[col] / scale, mode=mode, name=f"{key}: {what}",
                    line={"dash": dash, "color": colors(str(key)), "shape": shape},
                    marker={"color": colors(str(key)), "size": 6}, legendgroup=str(key),
                    hovertemplate=f"{key}<br>%{{x}}: %{{y:.2f}} {unit} ({what})<extra></extra>",
                ))  # fmt: skip
    fig.update_layout(template=TEMPLATE, title=title, xaxis_title=xaxis, yaxis_title=yaxis)
    return finish(fig)


def plot_live_set(curves, *, title=None):
    """Activation MB live at every op step per model; solid: freed at last use, dotted: as eager
    freed them."""
    series = [("planned_bytes", "solid", "lines", "freed at last use"),
              ("eager_bytes", "dot", "lines", "as eager PyTorch freed them")]  # fmt: skip
    title = title or "Activation memory live over one forward"
    x = "op step of the forward (ATen ops in order)"
    return _lines(
        curves, "step", series, "label", _color, 1e6, "MB", title, x, "live activations (MB)"
    )


def plot_layer_live(layer_curves, *, title=None):
    """Activation MB held after each layer per model: planned, eager and (markers) measured."""
    series = [("planned_bytes", "solid", "lines", "layer outputs to their last consumer"),
              ("eager_bytes", "dot", "lines", "layer outputs until released"),
              ("measured_bytes", "solid", "markers", "allocated (measured)")]  # fmt: skip
    return _lines(layer_curves, "index", series, "label", _color, 1e6, "MB",
                  title or "Memory held after each layer", "layer (position in forward order)",
                  "bytes held beyond the weights and input (MB)")  # fmt: skip


def plot_pool(pool, *, title=None):
    """Reserved (solid) and per-forward peak allocated (dotted) GB over a pool run, per
    allocator."""
    series = [("reserved_bytes", "solid", "lines", "reserved"),
              ("peak_allocated_bytes", "dot", "lines", "peak allocated in the forward"),
              ]  # fmt: skip
    return _lines(pool.sort_values("step"), "step", series, "alloc_conf",
                  lambda c: ALLOC_CONF_COLORS.get(c, OTHER_COLOR), 1e9, "GB",
                  title or "Caching allocator over a run of random batch sizes",
                  "forward in the run", "GPU memory (GB)", shape="linear")  # fmt: skip

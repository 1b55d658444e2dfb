"""Figures of notebook 06 and :func:`available`, the line a section shows when its root lacks a
dataset."""

from __future__ import annotations

import numpy as np
import plotly.express as px
import plotly.graph_objects as go

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import BOUND_COLORS, KERNEL_CLASS_COLORS, OCCUPANCY_COLORS, TEMPLATE
from yolo_sm.report.colors import color_map as _color_map
from yolo_sm.report.plots import lacks
from yolo_sm.report.style import finish, label
from yolo_sm.topics.roofline.analyse import BOUNDS, HIGH_PCT


def available(root: DataRoot, *names: str) -> bool:
    """Whether ``root`` holds every dataset of ``names``; else prints one line per missing one."""
    gone = [n for n in names if not root.has(n)]
    for n in gone:
        print(lacks(root, n))
    return not gone


def plot_roofline(table, *, title=None):
    """Log-log roofline per layer with FLOPs under the table's ceilings; marker size ~ kernel
    time."""
    pk, bw, ridge = (table.attrs[k] for k in ("peak_tflops", "peak_gbps", "ridge"))
    d = table[table.flops > 0].assign(width=lambda t: t.width.astype(str))
    hover = ["config", "layer", "module_type", "kernels", "time_us", "achieved_gbps", "pct_of_roof"]
    fig = px.scatter(d, x="intensity", y="achieved_tflops", color="width", size="time_us",
                     size_max=28, log_x=True, log_y=True, hover_data=hover, template=TEMPLATE,
                     title=title or "Roofline of YOLOv8 layers (Nsight Compute kernel time)",
                     )  # fmt: skip
    lo, hi = min(d.intensity.min() / 2, ridge / 50), max(d.intensity.max() * 2, ridge * 5)
    xs = np.geomspace(lo, hi, 200)
    top = max(pk, d.achieved_tflops.max()) * 1.5
    bottom = min(d.achieved_tflops.min(), lo * bw / 1e3) / 1.5
    fig.add_scatter(x=xs, y=np.minimum(pk, xs * bw / 1e3), mode="lines",
                    line={"color": "black", "dash": "dash"},
                    name=f"roof: {pk:.0f} TFLOP/s, {bw / 1e3:.1f} TB/s")  # fmt: skip
    fig.add_scatter(x=[ridge, ridge], y=[bottom, top], mode="lines",
                    line={"color": "grey", "dash": "dot"},
                    name=f"ridge point {ridge:.0f} FLOP/B")  # fmt: skip
    fig.update_xaxes(range=[np.log10(lo), np.log10(hi)])
    fig.update_yaxes(range=[np.log10(bottom), np.log10(top)])
    fig.update_layout(
        xaxis_title="arithmetic intensity (FLOP per byte of weights + inputs + output)",
        yaxis_title="achieved TFLOP/s", margin={"b": 90},
    )  # fmt: skip
    fig.add_annotation(text=f"Ceilings: {table.attrs.get('ceilings_from') or 'given'}",
                       xref="paper", yref="paper", x=0, y=-0.16, showarrow=False,
                       font={"size": 11, "color": "#555"})  # fmt: skip
    return finish(fig)


def plot_layer_heatmap(table, value="pct_of_roof", *, title=None, fmt=".0f", colorscale="Viridis"):
    """Layer x width heatmap of ``value`` (default: % of the roof achieved), text in cells."""
    order = table.drop_duplicates("layer").sort_values("index")
    piv = table.pivot_table(index="layer", columns="width", values=value).reindex(order.layer)
    fig = go.Figure(go.Heatmap(
        z=piv.values, x=[str(w) for w in piv.columns], colorscale=colorscale,
        y=[f"{r.layer} {r.module_type}" for r in order.itertuples()],
        texttemplate=f"%{{z:{fmt}}}", colorbar={"title": label(value)},
        hovertemplate="%{y}<br>width %{x}<br>%{z:.3g}<extra></extra>",
    ))  # fmt: skip
    fig.update_layout(template=TEMPLATE, title=title or label(value), height=650,
                      xaxis_title="width multiplier",
                      yaxis={"autorange": "reversed", "title": "layer"})  # fmt: skip
    return finish(fig)


def plot_normalised_roofline(df, *, x="dram_throughput_pct", y="sm_throughput_pct",
                             color="kernel_class", size="duration_us", facet_col=None, hover=(),
                             high: float = HIGH_PCT, title=None):  # fmt: skip
    """SM against DRAM throughput (% of the GPU's own peak), bands at ``high`` %."""
    cmap = {**KERNEL_CLASS_COLORS, **BOUND_COLORS, **_color_map(df[color].unique())}
    fig = px.scatter(df, x=x, y=y, color=color, size=size, size_max=30, facet_col=facet_col,
                     hover_data=[c for c in hover if c in df], color_discrete_map=cmap,
                     template=TEMPLATE,
                     title=title or "Normalised roofline: SM vs DRAM throughput")  # fmt: skip
    for x0, x1, y0, y1, bound in ((high, 100, 0, high, BOUNDS[0]), (0, high, high, 100, BOUNDS[1])):
        fig.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, opacity=0.08, line_width=0,
                      fillcolor=BOUND_COLORS[bound], row="all", col="all")  # fmt: skip
    fig.add_shape(type="line", x0=0, y0=0, x1=100, y1=100, line={"dash": "dot", "color": "grey"},
                  row="all", col="all")  # fmt: skip
    fig.update_xaxes(range=[0, 100], title_text="DRAM throughput (% of peak)")
    fig.update_yaxes(range=[0, 100], title_text="SM throughput (% of peak)", col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.add_annotation(text="blue band: bandwidth-bound · red band: compute-bound · lower left: "
                       "neither", xref="paper", yref="paper", x=0, y=-0.22, showarrow=False,
                       font={"size": 11})  # fmt: skip
    fig.update_layout(margin={"b": 100})
    return finish(fig)


def plot_stage_bars(stages, *, title=None):
    """Grouped bars per ResNet stage: time-weighted achieved occupancy, SM, DRAM and tensor-pipe
    throughput (% of peak), with the ``HIGH_PCT`` line."""
    cols = {"achieved_occupancy_tw_pct": "achieved occupancy", "sm_throughput_tw_pct":
            "SM throughput", "dram_throughput_tw_pct": "DRAM throughput",
            "tensor_pipe_tw_pct": "tensor pipe"}  # fmt: skip
    long = stages.melt(id_vars=["layer"], value_vars=list(cols), var_name="metric")
    colors = (OCCUPANCY_COLORS["achieved"], BOUND_COLORS[BOUNDS[1]], BOUND_COLORS[BOUNDS[0]],
              KERNEL_CLASS_COLORS["tensor_core_conv"])  # fmt: skip
    fig = px.bar(long.assign(metric=long.metric.map(cols)), x="layer", y="value", color="metric",
                 barmode="group", template=TEMPLATE,
                 color_discrete_map=dict(zip(cols.values(), colors, strict=True)),
                 title=title or "ResNet-101 per stage (time-weighted, % of peak)")  # fmt: skip
    fig.add_hline(y=HIGH_PCT, line_dash="dot", annotation_text=f"{HIGH_PCT:.0f} %")
    fig.update_layout(yaxis_title="% of peak (time-weighted over the stage's kernels)",
                      xaxis_title="ResNet-101 stage")  # fmt: skip
    return finish(fig)


def plot_yolo_occupancy(kernels, *, high: float = HIGH_PCT, title=None):
    """:func:`plot_normalised_roofline` of YOLO kernels (one per point) by the side of the
    occupancy cut, one panel per width."""
    hover = ["layer", "stage", "kernel_class", "theoretical_occupancy_pct", "tensor_pipe_pct",
             "blocks_per_sm", "kernel_name"]  # fmt: skip
    return plot_normalised_roofline(
        kernels.assign(width=kernels.width.astype(str)), color="occupancy", facet_col="width",
        hover=hover, high=high,
        title=title or "YOLOv8 kernels per width, by theoretical occupancy: normalised roofline",
    )  # fmt: skip


def plot_stage_kernels(kernels, *, high: float = HIGH_PCT, title=None):
    """:func:`plot_normalised_roofline` of the ResNet kernels inside a stage, by kernel class."""
    return plot_normalised_roofline(
        kernels[kernels.layer != ""], hover=["layer", "kernel_name", "tensor_pipe_pct"],
        high=high, title=title or "ResNet-101 kernels: normalised roofline (size = duration)",
    )  # fmt: skip


def plot_width_kernels(kernels, *, high: float = HIGH_PCT, title=None):
    """:func:`plot_normalised_roofline` of the wide conv stack's kernels, a panel per width."""
    return plot_normalised_roofline(
        kernels, facet_col="width", hover=["layer", "tensor_pipe_pct", "kernel_name"], high=high,
        title=title or "Wide conv stack kernels per width factor: normalised roofline",
    )  # fmt: skip

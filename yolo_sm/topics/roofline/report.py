"""Figures of the roofline notebook (06) and the one-line notes of its sections whose datasets
a root lacks."""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.hardware import CEILINGS, no_ceilings_message
from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE
from yolo_sm.report.colors import (
    BOUND_COLORS,
    KERNEL_CLASS_COLORS,
    OCCUPANCY_COLORS,
    TEMPLATE,
    width_color,
)
from yolo_sm.report.colors import color_map as _color_map
from yolo_sm.report.style import finish, label
from yolo_sm.topics.launches import hosts
from yolo_sm.topics.roofline.analyse import BOUNDS, HIGH_PCT

#: What a dataset is, by the prefix of its name, for the line a missing one gets.
WHAT = (
    ("ncu_", "Nsight Compute table", ": Nsight Compute profiles NVIDIA GPUs only"),
    ("trace_", "PyTorch profiler trace", ""),
    ("sweep_", "sweep", ""),
    ("model_layers", "model table", ""),
    ("ceilings", "measured ceilings", ", so the absolute roofline cannot be drawn"),
)


def missing_line(root: DataRoot, *names: str) -> str:
    """One sentence naming the datasets of ``names`` that ``root`` lacks ("" when it has all):
    the section that needs them is skipped."""
    gone = [n for n in names if not root.has(n)]
    if not gone:
        return ""
    if gone == [CEILINGS]:
        return no_ceilings_message(root)
    parts = []
    for n in gone:
        what, why = next(((w, y) for p, w, y in WHAT if n.startswith(p)), ("dataset", ""))
        parts.append(f"{what} ({n}){why}")
    return f"This root ({root.name}) holds no {'; no '.join(parts)}. This section is skipped."


def available(root: DataRoot, *names: str) -> bool:
    """Whether ``root`` holds every dataset of ``names``; prints :func:`missing_line` when not
    (a notebook section then shows that one line instead of its tables and figures)."""
    line = missing_line(root, *names)
    if line:
        print(line)
    return not line


def plot_roofline(table, *, color="width", symbol=None, title=None):
    """Log-log roofline: achieved TFLOP/s against arithmetic intensity (FLOP per byte of
    ``min_bytes``) per layer, under the table's ceilings (``table.attrs``: ``peak_tflops``,
    ``peak_gbps``, ``ridge``, ``ceilings_from``, where they were measured); marker size ~ time.
    Layers without FLOPs (Concat, Upsample) cannot sit on a log axis and are left out."""
    import numpy as np
    import plotly.express as px

    pk, bw, ridge = (table.attrs[k] for k in ("peak_tflops", "peak_gbps", "ridge"))
    d = table[table.flops > 0].copy()
    d["width"] = d.width.astype(str)
    fig = px.scatter(
        d,
        x="intensity",
        y="achieved_tflops",
        color=color,
        symbol=symbol,
        size="time_us",
        size_max=28,
        log_x=True,
        log_y=True,
        hover_data=[
            "config",
            "layer",
            "module_type",
            "kernels",
            "time_us",
            "achieved_gbps",
            "pct_of_roof",
        ],
        template=TEMPLATE,
        title=title or "Roofline of YOLOv8 layers (fp16 NHWC, Nsight Compute kernel time)",
    )
    lo = min(d.intensity.min() / 2, ridge / 50)
    hi = max(d.intensity.max() * 2, ridge * 5)
    xs = np.geomspace(lo, hi, 200)
    fig.add_scatter(
        x=xs,
        y=np.minimum(pk, xs * bw / 1e3),
        mode="lines",
        line={"color": "black", "dash": "dash"},
        name=f"roof: {pk:.0f} TFLOP/s, {bw / 1e3:.1f} TB/s",
    )
    top = max(pk, d.achieved_tflops.max()) * 1.5
    bottom = min(d.achieved_tflops.min(), lo * bw / 1e3) / 1.5
    fig.add_scatter(
        x=[ridge, ridge],
        y=[bottom, top],
        mode="lines",
        line={"color": "grey", "dash": "dot"},
        name=f"ridge point {ridge:.0f} FLOP/B",
    )
    fig.update_xaxes(range=[np.log10(lo), np.log10(hi)])  # log axes take log10 ranges
    fig.update_yaxes(range=[np.log10(bottom), np.log10(top)])
    fig.update_layout(
        xaxis_title="arithmetic intensity (FLOP per byte of weights + inputs + output, fp16)",
        yaxis_title="achieved TFLOP/s",
        legend={"font": {"size": 10}},
    )
    fig.add_annotation(
        text=f"Ceilings: {table.attrs.get('ceilings_from') or 'given by the caller'}",
        xref="paper",
        yref="paper",
        x=0,
        y=-0.16,
        showarrow=False,
        font={"size": 11, "color": "#555"},
    )
    fig.update_layout(margin={"b": 90})
    return finish(fig)


def plot_layer_heatmap(table, value="pct_of_roof", *, title=None, fmt=".0f", colorscale="Viridis"):
    """Layer x width heatmap of ``value`` (default: % of the roof achieved), text in cells."""
    import plotly.graph_objects as go

    order = table.drop_duplicates("layer").sort_values("index")
    labels = [f"{r.layer} {r.module_type}" for r in order.itertuples()]
    piv = table.pivot_table(index="layer", columns="width", values=value).reindex(order.layer)
    fig = go.Figure(
        go.Heatmap(
            z=piv.values,
            x=[str(w) for w in piv.columns],
            y=labels,
            colorscale=colorscale,
            texttemplate=f"%{{z:{fmt}}}",
            colorbar={"title": label(value)},
            hovertemplate="%{y}<br>width %{x}<br>%{z:.3g}<extra></extra>",
        )
    )
    fig.update_layout(
        template=TEMPLATE,
        title=title or value,
        xaxis_title="width multiplier",
        yaxis={"autorange": "reversed", "title": "layer"},
        height=650,
    )
    return finish(fig)


def plot_normalised_roofline(
    df,
    *,
    x="dram_throughput_pct",
    y="sm_throughput_pct",
    color="kernel_class",
    size="duration_us",
    facet_col=None,
    hover=(),
    high: float = HIGH_PCT,
    title=None,
):
    """SM throughput % against DRAM throughput % (each of the hardware's own peak) per kernel or
    group: the lower right is bandwidth-bound, the upper left compute-bound, the lower left
    neither (latency, launch or occupancy limits). Shaded bands mark the ``high`` threshold."""
    import plotly.express as px

    cmap = {**KERNEL_CLASS_COLORS, **BOUND_COLORS, **_color_map(df[color].unique())}
    fig = px.scatter(
        df,
        x=x,
        y=y,
        color=color,
        size=size,
        size_max=30,
        facet_col=facet_col,
        hover_data=[c for c in hover if c in df],
        color_discrete_map=cmap,
        template=TEMPLATE,
        title=title or "Normalised roofline: SM vs DRAM throughput (% of the GPU's own peak)",
    )
    fig.add_shape(
        type="rect", x0=high, x1=100, y0=0, y1=high, opacity=0.08,
        fillcolor=BOUND_COLORS[BOUNDS[0]], line_width=0, row="all", col="all",
    )  # fmt: skip
    fig.add_shape(
        type="rect", x0=0, x1=high, y0=high, y1=100, opacity=0.08,
        fillcolor=BOUND_COLORS[BOUNDS[1]], line_width=0, row="all", col="all",
    )  # fmt: skip
    fig.add_shape(
        type="line", x0=0, y0=0, x1=100, y1=100, line={"dash": "dot", "color": "grey"},
        row="all", col="all",
    )  # fmt: skip
    fig.update_xaxes(range=[0, 100], title_text="DRAM throughput (% of peak)")
    fig.update_yaxes(range=[0, 100], title_text="SM throughput (% of peak)", col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.add_annotation(
        text="blue band: bandwidth-bound · red band: compute-bound · lower left: neither",
        xref="paper", yref="paper", x=0, y=-0.22, showarrow=False, font={"size": 11},
    )  # fmt: skip
    fig.update_layout(margin={"b": 100})
    return finish(fig)


def plot_stage_bars(stages, *, title=None):
    """Grouped bars per ResNet stage: time-weighted achieved occupancy, SM %, DRAM %, tensor
    pipe %, with the ``high`` threshold as a line."""
    import plotly.express as px

    cols = {
        "achieved_occupancy_tw_pct": "achieved occupancy",
        "sm_throughput_tw_pct": "SM throughput",
        "dram_throughput_tw_pct": "DRAM throughput",
        "tensor_pipe_tw_pct": "tensor pipe",
    }
    long = stages.melt(id_vars=["layer"], value_vars=list(cols), var_name="metric")
    long["metric"] = long.metric.map(cols)
    fig = px.bar(
        long,
        x="layer",
        y="value",
        color="metric",
        barmode="group",
        template=TEMPLATE,
        title=title or "ResNet-101 per stage (time-weighted, % of peak)",
        color_discrete_map={
            "achieved occupancy": OCCUPANCY_COLORS["achieved"],
            "SM throughput": BOUND_COLORS[BOUNDS[1]],
            "DRAM throughput": BOUND_COLORS[BOUNDS[0]],
            "tensor pipe": KERNEL_CLASS_COLORS["tensor_core_conv"],
        },
    )
    fig.add_hline(y=HIGH_PCT, line_dash="dot", annotation_text=f"{HIGH_PCT:.0f} %")
    fig.update_layout(
        yaxis_title="% of peak (time-weighted over the stage's kernels)",
        xaxis_title="ResNet-101 stage",
    )
    return finish(fig)


def plot_yolo_occupancy(kernels, *, high: float = HIGH_PCT, title=None):
    """:func:`plot_normalised_roofline` of :func:`yolo_kernels`: one point per kernel, coloured by
    the side of the occupancy cut, one panel per width."""
    d = kernels.assign(width=kernels.width.astype(str))
    return plot_normalised_roofline(
        d,
        color="occupancy",
        facet_col="width",
        hover=[
            "layer",
            "stage",
            "kernel_class",
            "theoretical_occupancy_pct",
            "tensor_pipe_pct",
            "blocks_per_sm",
            "kernel_name",
        ],  # fmt: skip
        high=high,
        title=title
        or "YOLOv8 kernels per width (panels), by theoretical occupancy: normalised roofline",
    )


def plot_activations(act, *, title=None):
    """Bars: activation MB per image per layer, one colour per width."""
    import plotly.express as px

    d = act.assign(width=act.width.astype(str))
    fig = px.bar(
        d,
        x="label",
        y="activation_mb",
        color="width",
        barmode="group",
        hover_data=["out_channels", "out_h", "out_w", "weight_mb"],
        template=TEMPLATE,
        title=title or "Output activation per image and layer (fp16, 640x640)",
    )
    fig.update_layout(xaxis_title="layer", yaxis_title="MB per image (fp16)")
    return finish(fig)


def host_table(root: DataRoot, sweep: str):
    """:func:`yolo_sm.topics.launches.hosts.host_table` of ``root``'s ``sweep``, or None after one
    printed line where the root lacks the sweep or its host columns."""
    if not available(root, sweep):
        return None
    table = hosts.host_table(root.load(sweep))
    if table.empty:
        print(
            f"{root.name}/{sweep} was measured before the host columns (CPU time, launches and "
            "GPU busy time per forward) were recorded. This section is skipped."
        )
        return None
    return table


def host_line(root: DataRoot, table) -> str:
    """One markdown line naming the host CPU the root's points were measured on."""
    cpu = hosts.cpu_of(table)
    return f"Host CPU of `{root.name}`: {cpu or 'not recorded'}."


def plot_launches(per_type, *, title=None):
    """Stacked bars: kernels per forward per module type, per width."""
    import plotly.express as px

    d = per_type.assign(width=per_type.width.astype(str))
    fig = px.bar(
        d,
        x="width",
        y="kernels",
        color="module_type",
        hover_data=["launch_share", "time_share", "time_us"],
        template=TEMPLATE,
        title=title or "Kernel launches per forward by layer type (Kineto, iteration 0)",
    )
    fig.update_layout(xaxis_title="width", yaxis_title="kernels per forward", barmode="stack")
    return finish(fig)


def plot_stage_roofline(stages, *, high: float = HIGH_PCT, title=None):
    """:func:`plot_normalised_roofline` of :func:`yolo_sm.topics.roofline.analyse.resnet_stages`:
    one
    point per stage (time-weighted), sized by its kernel time."""
    return plot_normalised_roofline(
        stages,
        x="dram_throughput_tw_pct",
        y="sm_throughput_tw_pct",
        color="layer",
        size="time_us",
        hover=["kernels", "achieved_occupancy_tw_pct", "tensor_pipe_tw_pct", "achieved_tflops"],
        high=high,
        title=title or "ResNet-101 stages: normalised roofline (time-weighted; size = time)",
    )


def plot_stage_kernels(kernels, *, high: float = HIGH_PCT, title=None):
    """:func:`plot_normalised_roofline` of the ResNet kernels inside a stage (layer not ''), one
    point per kernel coloured by kernel class."""
    return plot_normalised_roofline(
        kernels[kernels.layer != ""],
        color="kernel_class",
        hover=["layer", "kernel_name", "tensor_pipe_pct"],
        high=high,
        title=title or "ResNet-101 kernels: normalised roofline (size = duration)",
    )


def plot_width_kernels(kernels, *, high: float = HIGH_PCT, title=None):
    """:func:`plot_normalised_roofline` of a per-kernel table with ``width`` (the wide conv
    stack), one panel per width factor."""
    return plot_normalised_roofline(
        kernels,
        color="kernel_class",
        facet_col="width",
        hover=["layer", "tensor_pipe_pct", "kernel_name"],
        high=high,
        title=title or "Wide conv stack kernels per width factor (panels): normalised roofline",
    )


def plot_gpu_busy(table, *, idle_share: float = HOST_BOUND_IDLE_SHARE, title=None):
    """Lines per width: the share of the forward during which the GPU ran a kernel, against
    batch, for eager points of :func:`yolo_sm.topics.launches.hosts.host_table`; the dotted line
    marks
    where the GPU idles ``idle_share`` of the forward (below it the point is host-bound)."""
    import plotly.graph_objects as go

    eager = table[table["backend"] == "eager"].sort_values(["width", "batch"])
    fig = go.Figure()
    for w, g in eager.groupby("width"):
        fig.add_trace(
            go.Scatter(
                x=g["batch"],
                y=g["gpu_busy_pct"],
                mode="lines+markers",
                name=f"width {w:g}",
                line={"color": width_color(w)},
                customdata=g[["median_ms", "gpu_busy_ms", "host_cpu_ms", "launches_per_forward"]],
                hovertemplate=(
                    f"width {w:g}, batch %{{x}}<br>GPU busy %{{y:.0f}} % of the forward"
                    "<br>forward %{customdata[0]:.2f} ms, kernels %{customdata[1]:.2f} ms"
                    "<br>launching thread CPU %{customdata[2]:.2f} ms"
                    "<br>%{customdata[3]:.0f} launches<extra></extra>"
                ),
            )
        )
    fig.add_hline(
        y=100 * (1 - idle_share),
        line_dash="dot",
        annotation_text="host-bound below",
        annotation_position="bottom right",
    )
    fig.update_layout(
        template=TEMPLATE,
        title=title or "Eager: the share of each forward the GPU spends running kernels",
        xaxis={
            "title": "batch (images per forward)",
            "type": "log",
            "tickvals": sorted(eager["batch"].unique().tolist()),
        },
        yaxis={"title": "GPU busy (% of the forward)", "range": [0, 105]},
        legend_title_text="width",
    )
    return finish(fig)

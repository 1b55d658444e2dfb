"""Plot functions ``plot_x(df, ...) -> Figure`` (never shown inside) and notebook helpers."""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import OCCUPANCY_COLORS, TEMPLATE, color_map
from yolo_sm.report.style import finish, label
from yolo_sm.report.tables import code, md

#: why a root may lack a dataset, by the start of its name
WHY_ABSENT = {
    "ncu_": "Nsight Compute runs on NVIDIA GPUs only",
    "profile_": "the per-layer profile joins Kineto and Nsight Compute on an NVIDIA GPU",
    "gpm_": "GPM counters exist on NVIDIA GPUs only",
    "bench_": "the fast-engines bench times CUDA engines",
    "ceilings": "the plan's ceilings step measures it",
    "model_layers": "the plan's model-table step writes it",
    "numerics": "the plan's numerics step writes it",
    "int8_kernels": "the plan's int8_kernels step times the int8 convolution kernels on an "
    "NVIDIA GPU",
}


def lacks(root: DataRoot, names) -> str:
    """One plain sentence: ``root`` holds no dataset ``names`` (a name or several), and
    why when the name says; a model's view (``root.base`` set) says what makes its tables."""
    names = [names] if isinstance(names, str) else list(names)
    if getattr(root, "base", None) is not None:
        return root.missing(names[0])
    why = next((w for p, w in WHY_ABSENT.items() for n in names if n.startswith(p)), "")
    if why and root.machine().get("sm_count"):  # a GPU root: not collected, not impossible
        why = "its collection has not run the plan step that writes it"
    return f"This root ({root.name}) holds no {', '.join(names)}" + (f": {why}." if why else ".")


SOFTWARE = (("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"), ("cudnn", "cuDNN"))


def about(root: DataRoot) -> str:
    """One Markdown line: what ``root`` was measured on."""
    m = {k: md(v) for k, v in root.machine().items()}  # dataset text: escaped (tables.md)
    parts = [
        f"{m['sm_count']} SMs" if m.get("sm_count") else "",
        f"compute capability {m['compute_capability']}" if m.get("compute_capability") else "",
        *(f"{label} {m[k]}" for k, label in SOFTWARE if m.get(k)),
    ]
    detail = ", ".join(p for p in parts if p)
    when = m.get("date_utc_last", "")[:10]
    if root.device_name() == root.name:
        return f"Data root {code(root.name)}: its provenance names no machine."
    return (
        f"Data root {code(root.name)}: measured on **{md(root.device_name())}**"
        + (f" ({detail})" if detail else "")
        + (f", last on {when}" if when else "")
        + "."
    )


def load_or_note(root: DataRoot, name: str):
    """Dataset ``name`` of ``root``, or None after printing :func:`lacks`."""
    if root.has(name):
        return root.load(name)
    print(lacks(root, name))
    return None


def setup_notebook() -> None:
    """Plotly.js inlined once (offline HTML), white template, table text never cut."""
    import pandas as pd
    import plotly.io as pio

    pio.renderers.default = "notebook"
    pio.templates.default = TEMPLATE
    pd.set_option("display.max_colwidth", None)


def plot_width_flops(table, *, x="width", y="gflops_per_img"):
    """GFLOPs per image against width, with the quadratic width^2 law for comparison."""
    import plotly.graph_objects as go

    base = table.loc[(table[x] - 1.0).abs().idxmin()]
    fig = go.Figure()
    fig.add_scatter(
        x=table[x],
        y=table[y],
        mode="lines+markers",
        name="counted (channel table)",
        hovertemplate="width %{x}<br>%{y:.1f} GFLOPs/img<extra></extra>",
    )
    fig.add_scatter(
        x=table[x],
        y=base[y] * (table[x] / base[x]) ** 2,
        mode="lines",
        line={"dash": "dot"},
        name="width² law from width 1.0",
    )
    fig.update_layout(
        title="FLOPs per 640x640 image vs width",
        xaxis_title="width multiplier",
        yaxis_title="GFLOPs per image (2 per multiply-add)",
        template=TEMPLATE,
    )
    return finish(fig)


def plot_occupancy_curves(curves, *, title="What-if: theoretical occupancy"):
    """Theoretical occupancy, one panel per ``vary`` value; hover names the limiter."""
    import plotly.express as px

    fig = px.line(
        curves,
        x="value",
        y="occupancy_pct",
        facet_col="vary",
        markers=True,
        hover_data=["active_blocks_per_sm", "active_warps_per_sm", "limiter"],
        template=TEMPLATE,
        title=title,
        line_shape="hv",
        color_discrete_sequence=[OCCUPANCY_COLORS["theoretical"]],
    )
    fig.update_xaxes(matches=None, title_text="")
    for i, v in enumerate(dict.fromkeys(curves["vary"]), start=1):
        bytes_ = " (bytes)" if v == "shared_mem_per_block" else ""
        fig.update_xaxes(title_text=label(v).replace("shared mem", "shared memory") + bytes_, col=i)
    fig.update_yaxes(range=[0, 105], title_text="theoretical occupancy (%)", col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return finish(fig)


def plot_achieved_vs_theoretical(df, *, color="kernel_class", size="duration_us", title=None):
    """Per-kernel achieved (measured) against theoretical occupancy; marker area ~ duration."""
    import plotly.express as px

    hover = "kernel_name nvtx_range block_size registers_per_thread shared_mem_per_block_bytes"
    hover = [
        c
        for c in f"{hover} grid_size duration_us limit_registers limit_shared_mem".split()
        if c in df
    ]
    d = df.assign(kernel_name=df.kernel_name.str.slice(0, 80))
    fig = px.scatter(
        d,
        x="theoretical_occupancy_pct",
        y="achieved_occupancy_pct",
        color=color,
        size=size,
        size_max=30,
        hover_data=hover,
        template=TEMPLATE,
        color_discrete_map=color_map(d[color].unique()),
        title=title or "Achieved vs theoretical occupancy per kernel (Nsight Compute)",
    )
    fig.add_shape(type="line", x0=0, y0=0, x1=100, y1=100, line={"dash": "dot", "color": "grey"})
    fig.update_layout(xaxis_title="theoretical occupancy (%)", yaxis_title="achieved occupancy (%)")
    return finish(fig)


def plot_class_shares(shares, *, y="nvtx_range", value="time_share", title=None):
    """Stacked horizontal bars: share of kernel time (or launches) per kernel class."""
    import plotly.express as px

    fig = px.bar(
        shares,
        y=y,
        x=value,
        color="kernel_class",
        orientation="h",
        hover_data=["kernels", "time_us"],
        template=TEMPLATE,
        color_discrete_map=color_map(shares.kernel_class.unique()),
        title=title or "Share of GPU kernel time by kernel class",
    )
    fig.update_layout(
        xaxis_tickformat=".0%",
        xaxis_title="share of GPU kernel time" if value == "time_share" else label(value),
        yaxis_title=label(y),
        barmode="stack",
    )
    return finish(fig)


def plot_bars(df, *, x, y, color=None, barmode="group", text=None, title=None, log_y=False):
    """Grouped bars of a tidy table."""
    import plotly.express as px

    cmap = color_map(df[color].unique()) if color else None
    fig = px.bar(
        df,
        x=x,
        y=y,
        color=color,
        barmode=barmode,
        text=text,
        log_y=log_y,
        color_discrete_map=cmap,
        template=TEMPLATE,
        title=title or f"{label(y)} by {label(x)}",
    )
    if text:
        fig.update_traces(texttemplate="%{text:.3s}", textposition="outside")
    return finish(fig)

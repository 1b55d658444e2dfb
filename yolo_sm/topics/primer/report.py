"""Figures of the occupancy primer (notebook 00), from the tables of
:mod:`yolo_sm.topics.primer.analyse`."""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import COLORS, TEMPLATE, color_map
from yolo_sm.report.sections import Note
from yolo_sm.report.style import finish
from yolo_sm.topics.primer.analyse import example_grids, sm_count, wave_table
from yolo_sm.topics.primer.kernels import LIMIT_COLUMNS, LIMIT_TABLES


def waves_or_note(root: DataRoot, active_blocks_per_sm: int = 1):
    """:func:`yolo_sm.topics.primer.analyse.wave_table` of :func:`example_grids` on ``root``'s GPU
    (SM count from provenance), or None after printing one line when the root names no GPU."""
    sms = sm_count(root)
    if sms is None:
        print(f"This root ({root.name}) names no GPU SM count: the wave table needs a GPU's.")
        return None
    return wave_table(example_grids(sms), active_blocks_per_sm=active_blocks_per_sm, sm_count=sms)


def plot_pipe_vs_occupancy(df, *, title=None):
    """Tensor-pipe utilisation against achieved occupancy, one marker per kernel (area = time),
    coloured by kernel class; one panel per config when there are several."""
    import plotly.express as px

    d = df.assign(short=df.kernel_name.str.slice(0, 70))
    fig = px.scatter(
        d,
        x="achieved_occupancy_pct",
        y="tensor_pipe_pct",
        color="kernel_class",
        color_discrete_map=color_map(d.kernel_class.unique()),
        size="duration_us",
        facet_col="config" if d.config.nunique() > 1 else None,
        facet_col_wrap=3,
        hover_data=["short", "block_size", "registers_per_thread", "sm_throughput_pct"],
        template=TEMPLATE,
        title=title or "Tensor pipes busy vs achieved occupancy, per kernel (area = time)",
        labels={
            "achieved_occupancy_pct": "achieved occupancy (%)",
            "tensor_pipe_pct": "tensor pipe active (%)",
            "kernel_class": "kernel class",
        },
    )
    return finish(fig)


def plot_limits(examples, *, title=None):
    """The four limits on real kernels: per example kernel (a row of
    :func:`yolo_sm.topics.primer.kernels.limit_examples`), the blocks per SM each limit
    allows, one bar per limit in its colour (log axis); the smallest bar of a group sets the
    kernel's active blocks."""
    import plotly.graph_objects as go

    names = {"registers": "registers", "shared_mem": "shared memory", "warps": "warp slots",
             "blocks": "block slots"}  # fmt: skip
    x = [
        f"{names[r.limit]} example<br>{r.kernel_class}, {int(r.block_size)} thr, "
        f"{int(r.registers_per_thread)} reg, {r.shared_mem_per_block_bytes / 1024:.0f} KiB"
        for r in examples.itertuples()
    ]
    fig = go.Figure()
    for limit, col in LIMIT_COLUMNS.items():
        fig.add_bar(
            x=x,
            y=examples[col],
            name=limit,
            legendgroup=limit,
            marker_color=COLORS[limit],
            text=examples[col],
            textposition="outside",
            hovertemplate=f"{names[limit]}: %{{y}} blocks per SM<extra></extra>",
        )
    fig.update_layout(
        template=TEMPLATE,
        barmode="group",
        title=title or "The four limits on real kernels: blocks per SM each one allows",
        xaxis_title="example kernel (the limit that alone sets its blocks per SM)",
        yaxis_title="blocks per SM the limit allows",
        yaxis_type="log",
        legend_title_text="limit",
        height=480,
    )
    return finish(fig)


def plot_waves(curve, flagship=None, tail=None, *, title=None):
    """SM utilisation against grid size (:func:`yolo_sm.topics.primer.kernels.utilisation_curve`)
    with the SM count's multiples dotted; ``flagship`` (kernels of one launch shape) adds its
    real grid sizes, marker area ~ time; ``tail`` (:func:`~yolo_sm.topics.primer.kernels.
    tail_example`) annotates the commonest one."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_scatter(
        x=curve.grid_size,
        y=curve.utilisation_pct,
        mode="lines",
        name="SM utilisation (every block as long)",
        line={"color": COLORS["grid"], "shape": "hv"},
        hovertemplate="grid %{x} blocks: %{y:.1f} % of SM time busy<extra></extra>",
    )
    slots = int(curve.grid_size[curve.waves == 1].max())
    for w in range(1, int(curve.waves.max()) + 1):
        fig.add_vline(x=w * slots, line_dash="dot", line_color="grey")
    if flagship is not None and len(flagship):
        by = flagship.groupby("grid_size").duration_us.agg(["sum", "size"]).reset_index()
        util = 100 * by.grid_size / (-(-by.grid_size // slots) * slots)
        fig.add_scatter(
            x=by.grid_size,
            y=util,
            mode="markers",
            name="flagship launches (area = time)",
            marker={
                "size": 8 + 30 * (by["sum"] / by["sum"].max()) ** 0.5,
                "color": COLORS["tensor_core_conv"],
                "opacity": 0.7,
            },
            customdata=by[["sum", "size"]],
            hovertemplate="grid %{x}: %{customdata[1]} launches, %{customdata[0]:,.0f} µs"
            "<extra></extra>",
        )
    if tail:
        fig.add_annotation(
            x=tail["grid_size"],
            y=tail["sm_coverage_pct"],
            text=f"grid {tail['grid_size']}: {tail['idle_sms']} of {tail['sm_count']} SMs idle",
            showarrow=True,
            ay=60,
        )
    fig.update_layout(
        template=TEMPLATE,
        title=title or f"Wave quantisation: SM utilisation vs grid size ({slots} block slots)",
        xaxis_title="grid size (blocks)",
        yaxis_title="SM time busy (%)",
        yaxis_range=[0, 105],
    )
    return finish(fig)


def no_kernels(root: DataRoot) -> Note:
    """The line a section on real kernels shows when ``root`` holds no Nsight Compute table."""
    return Note(
        f"This root ({root.name}) holds no Nsight Compute table "
        f"({', '.join(LIMIT_TABLES)}): Nsight Compute profiles NVIDIA GPUs only."
    )


def no_sm_count(root: DataRoot) -> str:
    """The line the waves section prints when ``root``'s provenance names no GPU SM count."""
    return f"This root ({root.name}) names no GPU SM count: the waves need a GPU's."


def plot_contrast(contrast, *, title=None):
    """Convolution time per forward per precision and layout
    (:func:`yolo_sm.topics.primer.kernels.simt_contrast`), coloured by the conv class holding
    most of it (log axis); hover: time-weighted achieved occupancy."""
    import plotly.express as px

    fig = px.bar(
        contrast,
        x="config",
        y="conv_ms",
        color="conv_class",
        log_y=True,
        text=contrast.achieved_occupancy_tw_pct.map("{:.0f} % occ.".format),
        color_discrete_map=color_map(contrast.conv_class.unique()),
        hover_data=["achieved_occupancy_tw_pct", "x_fastest"],
        template=TEMPLATE,
        title=title
        or "Convolution GPU time per forward: SIMT fp32 vs tensor cores, at like occupancy "
        "(bar text: achieved occupancy)",
    )
    fig.update_layout(
        xaxis_title="forward (precision, layout)",
        yaxis_title="convolution GPU time per forward (ms)",
        legend_title_text="kernel class",
    )
    return finish(fig)


def questions_markdown(q) -> Note:
    """The questions of :func:`yolo_sm.topics.primer.questions.questions` as a numbered list,
    each answer folded (HTML ``details``) until the reader opens it."""
    lines = [
        f"{i}. {r.question}\n   <details><summary>answer</summary>{r.answer}</details>\n"
        for i, r in enumerate(q.itertuples(), start=1)
    ]
    return Note("\n".join(lines) if lines else "No question can be computed from this root.")

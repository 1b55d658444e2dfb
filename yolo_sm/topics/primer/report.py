"""Figures and reader questions of the occupancy primer (notebook 00)."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.occupancy import ARCH, LIMIT_COLUMNS, theoretical_occupancy
from yolo_sm.analyse.weighting import sm_coverage
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import COLORS, TEMPLATE, color_map
from yolo_sm.report.sections import Note
from yolo_sm.report.style import finish
from yolo_sm.topics.primer.analyse import (
    NCU_TABLES,
    SIMT_TABLE,
    flagship_kernels,
    kernels_of,
    limit_examples,
    simt_contrast,
    simt_vs_tensor,
    tail_example,
)


# fmt: off
def plot_pipe_vs_occupancy(df, *, title=None):
    """Tensor-pipe utilisation against achieved occupancy per kernel (area = time)."""
    import plotly.express as px

    d = df.assign(short=df.kernel_name.str.slice(0, 70))
    labels = {"achieved_occupancy_pct": "achieved occupancy (%)",
              "tensor_pipe_pct": "tensor pipe active (%)", "kernel_class": "kernel class"}
    fig = px.scatter(
        d, x="achieved_occupancy_pct", y="tensor_pipe_pct", color="kernel_class",
        color_discrete_map=color_map(d.kernel_class.unique()), size="duration_us",
        facet_col="config" if d.config.nunique() > 1 else None, facet_col_wrap=3,
        hover_data=["short", "block_size", "registers_per_thread", "sm_throughput_pct"],
        template=TEMPLATE, labels=labels,
        title=title or "Tensor pipes busy vs achieved occupancy, per kernel (area = time)",
    )
    return finish(fig)


def plot_limits(examples, *, title=None):
    """Per example kernel, the blocks per SM each limit allows (log bars)."""
    import plotly.graph_objects as go

    names = {"registers": "registers", "shared_mem": "shared memory", "warps": "warp slots",
             "blocks": "block slots"}
    x = [f"{names[r.limit]} example<br>{r.kernel_class}, {int(r.block_size)} thr, "
         f"{int(r.registers_per_thread)} reg, {r.shared_mem_per_block_bytes / 1024:.0f} KiB"
         for r in examples.itertuples()]
    fig = go.Figure()
    for limit, col in LIMIT_COLUMNS.items():
        fig.add_bar(x=x, y=examples[col], name=limit, marker_color=COLORS[limit],
                    text=examples[col], textposition="outside",
                    hovertemplate=f"{names[limit]}: %{{y}} blocks per SM<extra></extra>")
    fig.update_layout(
        template=TEMPLATE, barmode="group", yaxis_type="log", legend_title_text="limit",
        height=480, title=title or "The four limits on real kernels: blocks per SM each allows",
        xaxis_title="example kernel (the limit that alone sets its blocks per SM)",
        yaxis_title="blocks per SM the limit allows",
    )
    return finish(fig)


def plot_waves(curve, flagship=None, tail=None, *, title=None):
    """SM coverage against grid size, with the flagship's real grids and its tail."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_scatter(x=curve.grid_size, y=curve.utilisation_pct, mode="lines",
                    name="SM coverage (every block as long)",
                    line={"color": COLORS["grid"], "shape": "hv"},
                    hovertemplate="grid %{x} blocks: %{y:.1f} % of block slots<extra></extra>")
    slots = int(curve.grid_size[curve.waves == 1].max())
    for w in range(1, int(curve.waves.max()) + 1):
        fig.add_vline(x=w * slots, line_dash="dot", line_color="grey")
    if flagship is not None and len(flagship):
        by = flagship.groupby("grid_size").duration_us.agg(["sum", "size"]).reset_index()
        size = 8 + 30 * (by["sum"] / by["sum"].max()) ** 0.5
        fig.add_scatter(x=by.grid_size, y=100 * sm_coverage(by.grid_size / slots),
                        mode="markers", name="flagship launches (area = time)",
                        marker={"size": size, "color": COLORS["tensor_core_conv"], "opacity": 0.7},
                        customdata=by[["sum", "size"]],
                        hovertemplate="grid %{x}: %{customdata[1]} launches, "
                        "%{customdata[0]:,.0f} µs<extra></extra>")
    if tail:
        fig.add_annotation(x=tail["grid_size"], y=tail["sm_coverage_pct"], showarrow=True, ay=60,
                           text=f"grid {tail['grid_size']}: {tail['idle_sms']} of "
                           f"{tail['sm_count']} SMs idle")
    fig.update_layout(
        template=TEMPLATE, xaxis_title="grid size (blocks)", yaxis_title="SM coverage (%)",
        yaxis_range=[0, 105],
        title=title or f"Wave quantisation: SM coverage vs grid size ({slots} block slots)",
    )
    return finish(fig)
# fmt: on


def no_kernels(root: DataRoot) -> Note:
    """The line a section on real kernels shows when ``root`` holds no ncu table."""
    return Note(
        f"This root ({root.name}) holds no Nsight Compute table "
        f"({', '.join(NCU_TABLES)}): Nsight Compute profiles NVIDIA GPUs only."
    )


def no_sm_count(root: DataRoot) -> str:
    """The line the waves section prints when ``root`` names no SM count."""
    return f"This root ({root.name}) names no GPU SM count: the waves need a GPU's."


def plot_contrast(contrast, *, title=None):
    """Conv GPU ms per forward (log) per precision and layout, by conv class."""
    import plotly.express as px

    fig = px.bar(
        contrast, x="config", y="conv_ms", color="conv_class", log_y=True, template=TEMPLATE,
        text=contrast.achieved_occupancy_tw_pct.map("{:.0f} % occ.".format),
        color_discrete_map=color_map(contrast.conv_class.unique()),
        hover_data=["achieved_occupancy_tw_pct", "x_fastest"],
        title=title or "Convolution GPU time per forward: SIMT fp32 vs tensor cores, at like "
        "occupancy (bar text: achieved occupancy)",
    )  # fmt: skip
    fig.update_layout(xaxis_title="forward (precision, layout)", legend_title_text="kernel class",
                      yaxis_title="convolution GPU time per forward (ms)")  # fmt: skip
    return finish(fig)


def questions(root: DataRoot, launch: dict, sm_count: int | None) -> pd.DataFrame:
    """Questions for the reader, answers computed from ``root`` (those it can answer)."""
    cc = launch["compute_capability"]
    shape = (launch["threads_per_block"], launch["registers_per_thread"],
             launch["shared_mem_per_block"])  # fmt: skip
    r = theoretical_occupancy(cc, *shape)
    rows = [(
        f"How many blocks of the {shape[0]}-thread, {shape[1]}-register launch with "
        f"{shape[2]:,} B of shared memory fit on one SM, and what would a second block need?",
        f"{r.active_blocks_per_sm}; a second needs {2 * r.registers_per_block_allocated:,} of "
        f"{ARCH[cc].registers_per_sm:,} registers and {2 * r.shared_mem_per_block_allocated:,} B "
        f"of the {r.shared_mem_config_bytes:,} B carve-out; short: "
        + (", ".join(n.replace("_", " ") for n in r.binding_limits) or "nothing") + ".",
    )]  # fmt: skip
    k = kernels_of(root)
    if k is not None and sm_count:
        flag = flagship_kernels(k, launch)
        if len(flag):
            t = tail_example(flag, sm_count)
            rows.append((
                f"That launch's commonest grid is {t['grid_size']} blocks. On this GPU's "
                f"{sm_count} SMs, what share of the SMs idles, and does achieved occupancy drop?",
                f"{t['idle_sms']} SMs idle (SM coverage {t['sm_coverage_pct']:.1f} %). Achieved "
                f"occupancy is {t['achieved_occupancy_tw_pct']:.1f} % against "
                f"{t['theoretical_occupancy_tw_pct']:.2f} % theoretical: idle SMs have no active "
                "cycles, so they do not lower it.",
            ))  # fmt: skip
        ex = limit_examples(k).set_index("limit")
        if "registers" in ex.index:
            e = ex.loc["registers"]
            b, s = int(e.block_size), int(e.shared_mem_per_block_bytes)
            before = theoretical_occupancy(cc, b, int(e.registers_per_thread), s)
            after = theoretical_occupancy(cc, b, 128, s)
            rows.append((
                f"The register-limited {e.kernel_class} kernel uses {int(e.registers_per_thread)} "
                "registers per thread. Compiled to 128, what theoretical occupancy would it reach?",
                f"{after.occupancy_pct:.2f} % (from {before.occupancy_pct:.2f} %): "
                f"{after.active_blocks_per_sm} blocks per SM, now limited by {after.limiter}.",
            ))  # fmt: skip
        g = 2 * sm_count + 1
        rows.append((
            f"A grid of {g:,} blocks at one block per SM: how many waves, and how busy are the "
            "SMs if every block takes as long?",
            f"3 waves, the last holding 1 block: {100 * sm_coverage(g / sm_count):.1f} % of SM "
            "time busy.",
        ))  # fmt: skip
    if root.has(SIMT_TABLE) and (s := simt_vs_tensor(simt_contrast(root.load(SIMT_TABLE)))):
        rows.append((
            "The fp32 SIMT convolutions and the fp16 tensor-core ones run at a similar, low "
            "achieved occupancy. How much longer do the SIMT ones take?",
            f"{s['time_ratio']:.1f}x ({s['simt_config']}: {s['simt_achieved_occupancy_pct']:.1f} "
            f"% achieved; {s['tensor_config']}: {s['tensor_achieved_occupancy_pct']:.1f} %).",
        ))  # fmt: skip
    return pd.DataFrame(rows, columns=["question", "answer"])


def questions_markdown(q) -> Note:
    """The questions as a numbered list, each answer folded."""
    lines = [
        f"{i}. {r.question}\n   <details><summary>answer</summary>{r.answer}</details>\n"
        for i, r in enumerate(q.itertuples(), start=1)
    ]
    return Note("\n".join(lines) if lines else "No question can be computed from this root.")

"""Notebook 08's host section: the host table and the GPU's busy share of eager forwards."""

from __future__ import annotations

import plotly.graph_objects as go

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE
from yolo_sm.report.colors import TEMPLATE, width_color
from yolo_sm.report.style import finish
from yolo_sm.topics.launches import analyse
from yolo_sm.topics.roofline.report import available


def host_table(root: DataRoot, sweep: str):
    """The host table of ``root``'s ``sweep``, or None after one line saying why not."""
    if not available(root, sweep):
        return None
    table = analyse.host_table(root.load(sweep))
    if table.empty:
        print(f"{root.name}/{sweep} was measured without the host columns (CPU time, launches "
              "and GPU busy time per forward). This section is skipped.")  # fmt: skip
        return None
    return table


def host_line(root: DataRoot, table) -> str:
    """One Markdown line naming the host CPU the root's points were measured on."""
    return f"Host CPU of `{root.name}`: {analyse.cpu_of(table) or 'not recorded'}."


def plot_gpu_busy(table, *, idle_share: float = HOST_BOUND_IDLE_SHARE, title=None):
    """Per width: GPU busy share of each eager forward against batch."""
    eager = table[table.backend == "eager"].sort_values(["width", "batch"])
    fig = go.Figure()
    for w, g in eager.groupby("width"):
        fig.add_trace(go.Scatter(
            x=g.batch, y=g.gpu_busy_pct, mode="lines+markers", name=f"width {w:g}",
            line={"color": width_color(w)},
            customdata=g[["median_ms", "gpu_busy_ms", "host_cpu_ms", "launches_per_forward"]],
            hovertemplate=f"width {w:g}, batch %{{x}}<br>GPU busy %{{y:.0f}} % of the forward"
            "<br>forward %{customdata[0]:.2f} ms, kernels %{customdata[1]:.2f} ms"
            "<br>launching thread CPU %{customdata[2]:.2f} ms"
            "<br>%{customdata[3]:.0f} launches<extra></extra>",
        ))  # fmt: skip
    fig.add_hline(y=100 * (1 - idle_share), line_dash="dot", annotation_text="host-bound below",
                  annotation_position="bottom right")  # fmt: skip
    fig.update_layout(
        template=TEMPLATE, legend_title_text="width",
        title=title or "Eager: the share of each forward the GPU spends running kernels",
        xaxis={"title": "batch (images per forward)", "type": "log",
               "tickvals": sorted(eager.batch.unique().tolist())},
        yaxis={"title": "GPU busy (% of the forward)", "range": [0, 105]},
    )  # fmt: skip
    return finish(fig)

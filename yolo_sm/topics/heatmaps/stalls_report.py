"""Figures of notebook 04's stall section: what the top kernel of each layer waits on (the
Nsight Compute ``stalls`` set, :mod:`yolo_sm.topics.heatmaps.stalls`)."""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import tables
from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.sections import needs
from yolo_sm.report.style import finish
from yolo_sm.topics.heatmaps import stalls

DATASET = "ncu_stalls_w1"


def plot_stalls(long, title: str | None = None):
    """Per layer (its top kernel), the cycles a warp waits between two instructions, split by
    stall reason (stacked horizontal bars, layers in forward order)."""
    import plotly.express as px

    order = list(dict.fromkeys(long.label))
    fig = px.bar(
        long,
        y="label",
        x="cycles",
        color="reason",
        orientation="h",
        hover_data=["kernel", "share"],
        category_orders={"label": order},
        template=TEMPLATE,
        title=title or "What the top kernel of each layer waits on",
    )
    fig.update_xaxes(title_text="stall cycles per issued instruction (warp average)")
    fig.update_yaxes(title_text="layer", autorange="reversed")
    fig.update_layout(height=max(420, 18 * len(order) + 160), legend_title_text="stall reason")
    return finish(fig)


@needs(DATASET)
def top_kernels(root: DataRoot):
    """The top kernel of each layer: its main stall reason and share, warp execution
    efficiency, L1 / L2 hit rates and local-memory (spill) sectors."""
    t = stalls.top_kernels(root.load(DATASET))
    keep = [c for c in t.columns if not stalls.STALL.fullmatch(c) and c != "config"]
    return tables.show(t[keep])


@needs(DATASET)
def stalls_figure(root: DataRoot):
    long = stalls.stalls_long(stalls.top_kernels(root.load(DATASET)))
    return plot_stalls(
        long, title=f"What the top kernel of each layer waits on ({root.device_name()})"
    )


@needs(DATASET)
def spills(root: DataRoot):
    """Kernels with local-memory traffic (register spills), longest first."""
    return tables.show(stalls.spill_kernels(root.load(DATASET)))

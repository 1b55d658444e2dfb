"""Figures of the occupancy primer (notebook 00), from the tables of
:mod:`yolo_sm.analyse.primer`."""

from __future__ import annotations

from yolo_sm.analyse.primer import example_grids, sm_count, wave_table
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import TEMPLATE, color_map
from yolo_sm.report.style import finish


def waves_or_note(root: DataRoot, active_blocks_per_sm: int = 1):
    """:func:`yolo_sm.analyse.primer.wave_table` of :func:`example_grids` on ``root``'s GPU
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

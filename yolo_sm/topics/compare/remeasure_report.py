"""Figures of re-measures: new / first img/s per point (from
:func:`yolo_sm.topics.compare.remeasure.compare`)."""

from __future__ import annotations

from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.style import finish
from yolo_sm.topics.compare.remeasure import TOLERANCE


def plot_compare(cmp, title=None):
    """new / shipped img/s against batch per point, colour by backend, symbol launch-bound;
    the band of +- :data:`yolo_sm.topics.compare.remeasure.TOLERANCE` shaded."""
    import plotly.express as px

    d = cmp.assign(kind=cmp.launch_bound.map({True: "launch-bound", False: "not launch-bound"}))
    fig = px.scatter(
        d,
        x="batch",
        y="ratio",
        color="backend",
        symbol="kind",
        hover_data=["width", "shipped_img_per_s", "new_img_per_s"],
        log_x=True,
        template=TEMPLATE,
        title=title or "Measured again: new / shipped img/s per point",
    )
    fig.add_hrect(y0=1 - TOLERANCE, y1=1 + TOLERANCE, fillcolor="grey", opacity=0.15, line_width=0)
    fig.update_layout(yaxis_title="new / shipped img/s")
    return finish(fig)

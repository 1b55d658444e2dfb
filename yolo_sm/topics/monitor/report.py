"""Figures and tables of notebook 16: the monitor's series coloured by engine, per-engine
medians."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import OTHER_COLOR, TEMPLATE, batch_color, category_color
from yolo_sm.report.sections import needs, section
from yolo_sm.report.style import finish
from yolo_sm.report.tables import show
from yolo_sm.topics.monitor import analyse as monitor

#: a field's panel title: what it is, in dcgm-exporter's unit
FIELD_TITLES = {
    monitor.OCCUPANCY: "SM occupancy (ratio of warp slots)",
    monitor.SM_ACTIVE: "SM active (ratio of SMs with a warp)",
    monitor.TENSOR: "tensor pipe active (ratio)",
    monitor.DRAM: "DRAM active (ratio)",
    monitor.GPU_UTIL: "GPU utilisation, nvidia-smi's (%)",
    monitor.FB_USED: "framebuffer used (MiB)",
    monitor.SM_CLOCK: "SM clock (MHz)",
    monitor.POWER: "power (W)",
}


def _engine_color(engine: str) -> str:
    if engine == monitor.IDLE:
        return OTHER_COLOR
    return category_color(engine) or OTHER_COLOR


def plot_series(df: pd.DataFrame, title: str | None = None):
    """One panel per field against time, a marker per sample coloured by its engine (grey: idle)."""
    from plotly.subplots import make_subplots

    w = monitor.wide(df)
    w["engine"] = w["engine"].where(w["engine"] != "", monitor.IDLE)
    fields = [f for f in monitor.FIELD_ORDER if f in w]
    titles = [FIELD_TITLES[f] for f in fields]
    fig = make_subplots(rows=len(fields), cols=1, shared_xaxes=True, vertical_spacing=0.02,
                        subplot_titles=titles)  # fmt: skip
    engines = list(dict.fromkeys(w.sort_values("t_s")["engine"]))
    for engine in engines:
        g = w[w.engine == engine]
        batch = g["batch"].map(lambda b: "" if pd.isna(b) else f", batch {int(b)}")
        text = engine + batch
        for row, f in enumerate(fields, start=1):
            fig.add_scatter(x=g["t_s"], y=g[f], mode="markers", name=engine, text=text,
                            marker={"size": 5, "color": _engine_color(engine)},
                            legendgroup=engine, showlegend=row == 1, row=row, col=1,
                            hovertemplate="%{text}<br>%{x:.1f} s: %{y:.3g}<extra></extra>",
                            )  # fmt: skip
    fig.update_xaxes(title_text="time since the monitor started (s)", row=len(fields), col=1)
    fig.update_layout(template=TEMPLATE, height=150 * len(fields) + 120,
                      title=title or "What the dashboard shows while the bench runs",
                      legend={"title": {"text": "engine running"}})  # fmt: skip
    return finish(fig)


series = section(monitor.MONITOR, plot_series)


@needs(monitor.MONITOR)
def engines(root: DataRoot):
    """The median of every field per engine and batch, in the order they ran."""
    t = monitor.per_engine(root.load(monitor.MONITOR))
    return show(t.rename(columns=lambda c: FIELD_TITLES.get(c, c)))


def plot_active_vs_occupancy(rel: pd.DataFrame, title: str | None = None):
    """SM occupancy against SM active per GPM window, coloured by batch, with the line of
    equality."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for batch, g in rel.sort_values("batch").groupby("batch", sort=True):
        fig.add_scatter(x=g["sm_active"], y=g["sm_occupancy"], mode="markers",
                        marker={"size": 6, "color": batch_color(float(batch))},
                        name=f"b{int(batch)}",
                        hovertemplate="SM active %{x:.2f}, occupancy %{y:.2f}<extra></extra>",
                        )  # fmt: skip
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": OTHER_COLOR},
                    name="occupancy = activity")  # fmt: skip
    fig.update_layout(template=TEMPLATE,
                      title=title or "SM occupancy against SM activity, per GPM window",
                      xaxis_title="SM active (ratio of SMs with a warp)",
                      yaxis_title="SM occupancy (ratio of warp slots)",
                      legend={"title": {"text": "batch"}}, xaxis={"range": [0, 1.02]},
                      yaxis={"range": [0, 1.02]})  # fmt: skip
    return finish(fig)


active_vs_occupancy = section(monitor.GPM_BATCH, monitor.gpm_relation, plot_active_vs_occupancy)

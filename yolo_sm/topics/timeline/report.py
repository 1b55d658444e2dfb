"""Notebook 05's figures (GPM metrics over time, one forward's kernels, the gaps) and sections."""

from __future__ import annotations

from yolo_sm.analyse import gpm
from yolo_sm.analyse.gpm import gpm_wide
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import with_config
from yolo_sm.report import plots, tables
from yolo_sm.report.colors import KERNEL_CLASS_COLORS, TEMPLATE
from yolo_sm.report.style import finish
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.batch.analyse import GPM_METRICS, parse_config
from yolo_sm.topics.batch.report import GPM_LABELS, short_label
from yolo_sm.topics.timeline import analyse as timeline
from yolo_sm.topics.timeline.analyse import kernel_gaps, run_spans

# fmt: off


def plot_gpm_timeline(gpm, vary: str = "batch", title: str | None = None):
    """The four GPM metrics against time, each config's run phase shaded; windows
    that straddle a marker change as open circles."""
    from plotly.subplots import make_subplots

    w = gpm_wide(gpm)
    metrics = [m for m in GPM_METRICS if m in w]
    fig = make_subplots(
        rows=len(metrics), cols=1, shared_xaxes=True, vertical_spacing=0.03,
        subplot_titles=[GPM_LABELS[m] for m in metrics],
    )
    shades = ("#DCE6F7", "#F7E3DC")
    for i, s in run_spans(w).iterrows():
        fig.add_vrect(
            x0=s.t0_s, x1=s.t1_s, fillcolor=shades[i % 2], opacity=0.6, line_width=0, layer="below",
            row="all", col=1, exclude_empty_subplots=False,
        )
        fig.add_annotation(
            x=(s.t0_s + s.t1_s) / 2, y=1.0, yshift=28, xref="x", yref="paper", yanchor="bottom",
            text=f"<b>{short_label(s.config, vary)}</b>", showarrow=False,
        )
    straddle = w["straddles_mark"].astype(bool)
    for row, m in enumerate(metrics, start=1):
        fig.add_scatter(x=w.t_s, y=w[m], mode="lines", line_shape="vh", name=GPM_LABELS[m],
                        line={"color": "#444", "width": 1.2}, showlegend=False,
                        customdata=w[["config", "phase"]], row=row, col=1,
                        hovertemplate="%{customdata[0]} %{customdata[1]}<br>t=%{x:.2f} s: "
                        "%{y:.1f} %<extra></extra>")
        fig.add_scatter(x=w.t_s[straddle], y=w.loc[straddle, m], mode="markers",
                        marker={"symbol": "circle-open", "color": "#D62728", "size": 7},
                        name="window straddles a marker", showlegend=row == 1,
                        hoverinfo="skip", row=row, col=1)
        fig.update_yaxes(range=[0, 105], title_text="percent", row=row, col=1)
    fig.update_xaxes(title_text="time since sampler start (s)", row=len(metrics), col=1)
    fig.update_layout(
        template=TEMPLATE, height=200 * len(metrics) + 120, title=title or "GPM timeline",
        margin={"t": 110}, legend={"orientation": "h", "y": -0.08},
    )
    return finish(fig)


def plot_kernel_timeline(trace, iteration: int = 0, max_configs: int = 4):
    """One row per config: each kernel as a bar from start to end (ms), by class."""
    import plotly.graph_objects as go

    d = trace[trace["iteration"] == iteration]
    configs = sorted(d["config"].unique(), key=lambda c: parse_config(c)["batch"])[:max_configs]
    fig = go.Figure()
    seen = set()
    for c in configs:
        g = d[d["config"] == c].sort_values("start_us")
        t0 = g["start_us"].min()
        for cls, k in g.groupby("kernel_class"):
            fig.add_bar(y=[short_label(c)] * len(k), x=k.duration_us / 1000,
                        base=(k.start_us - t0) / 1000, orientation="h", name=cls,
                        marker_color=KERNEL_CLASS_COLORS.get(cls, "#7F7F7F"), marker_line_width=0,
                        legendgroup=cls, showlegend=cls not in seen,
                        customdata=k.kernel_name.str.slice(0, 70),
                        hovertemplate="%{customdata}<br>start %{base:.3f} ms, %{x:.4f} ms"
                        "<extra></extra>")
            seen.add(cls)
    fig.update_layout(
        template=TEMPLATE, barmode="overlay", bargap=0.3,
        title=f"Kernels of one eager forward on the GPU (Kineto, iteration {iteration})",
        xaxis_title="ms since the forward's first kernel", yaxis_title="config", height=450,
    )
    return finish(fig)


def plot_gap_hist(trace):
    """ECDF of the gaps between consecutive kernels per batch (log x, floor 0.5 us)."""
    import plotly.express as px

    d = kernel_gaps(trace).dropna(subset=["gap_us"])
    d = with_config(d).sort_values("batch")
    d = d.assign(batch=d["batch"].astype(str), gap_us=d["gap_us"].clip(lower=0.5))
    fig = px.ecdf(
        d, x="gap_us", color="batch", log_x=True, template=TEMPLATE,
        title="Gaps between consecutive kernels: share of gaps at most x µs (Kineto)",
    )
    fig.update_layout(
        xaxis_title="gap from the previous kernel's end to this kernel's start (µs)",
        yaxis_title="share of gaps",
    )
    return finish(fig)


def gpm_overhead(root: DataRoot, name: str) -> list:
    """The GPM sampler's cost per config."""
    if not root.has(name):
        return [plots.lacks(root, name)]
    return [tables.show(gpm.gpm_overhead_table(root.load(name)))]


def gpm_timeline(root: DataRoot, name: str, vary: str = "batch") -> list:
    """The GPM timeline of ``name`` (configs varying in ``vary``) and its medians."""
    if not root.has(name):
        return [plots.lacks(root, name)]
    g = root.load(name)
    title = f"GPM timeline, {root.device_name()}: configs by {vary}"
    return [plot_gpm_timeline(g, vary, title=title), tables.show(gpm.gpm_medians(g))]


def gaps(root: DataRoot, trace: str) -> list:
    """Launch gaps per forward of a Kineto trace: table, one forward's kernels, gap ECDF."""
    if not root.has(trace):
        return [plots.lacks(root, trace)]
    tr = root.load(trace)
    return [tables.show(timeline.launch_gaps(tr)), plot_kernel_timeline(tr), plot_gap_hist(tr)]


def gaps_vs_sweep(root: DataRoot, trace: str, sweep: str) -> list:
    """The traced forwards beside the sweep's eager and graph latency."""
    if not root.has(trace) or not root.has(sweep):
        return [plots.lacks(root, trace if not root.has(trace) else sweep)]
    g = timeline.launch_gaps(root.load(trace))
    t = batch.batch_table(root.load(sweep))
    return [tables.show(timeline.launch_vs_sweep(g, t, batch.nearest(g.width, batch.REF_WIDTH)))]

"""Figures of the width and precision notebooks (01, 02)."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.bench_table import ok_rows
from yolo_sm.contract.labels import with_config
from yolo_sm.report.colors import COLORS, TEMPLATE, color_map
from yolo_sm.report.plots import plot_class_shares
from yolo_sm.report.style import finish
from yolo_sm.topics.deploy.report import plot_speedup_vs_width
from yolo_sm.topics.precision.analyse import PRECISION_ORDER, precision_class_shares, tolerance
from yolo_sm.topics.width.analyse import COMPILE_VARIANTS


# fmt: off
def plot_width_lines(table, *, y="img_per_s", log_y=True, title=None, y_title=None):
    """``y`` against width, one line per batch, one panel per backend (hover: latency, TFLOP/s)."""
    import plotly.express as px

    d = table.sort_values(["batch", "width"]).assign(batch=lambda x: x.batch.astype(str))
    hover = [c for c in ("median_ms", "iqr_ms", "tflops", "peak_frac", "img_per_s") if c in d]
    fig = px.line(d, x="width", y=y, color="batch", facet_col="backend", markers=True,
                  log_y=log_y, hover_data=hover, template=TEMPLATE, title=title or f"{y} vs width",
                  color_discrete_sequence=px.colors.sequential.Viridis)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_xaxes(title_text="width multiplier")
    fig.update_yaxes(title_text=y_title or y, col=1)
    if y == "peak_frac":
        fig.update_yaxes(tickformat=".0%")
    return finish(fig)


def plot_img_per_s(table, device: str = ""):
    """img/s against width (log), a line per batch, a panel per backend."""
    where = f" ({device})" if device else ""
    return plot_width_lines(table, title=f"img/s vs width, fp16 NHWC{where}",
                            y_title="images per second")


def plot_peak_share(table):
    """Delivered TFLOP/s as a share of the fp16 matmul ceiling against width."""
    return plot_width_lines(
        table, y="peak_frac", log_y=False, y_title="share of the fp16 matmul ceiling",
        title="Delivered TFLOP/s as a share of the fp16 matmul ceiling (hover: TFLOP/s)")


def plot_width_occupancy(occ, *, title=None):
    """Time-weighted occupancy, SM coverage and tensor-core share (%) against width."""
    import plotly.graph_objects as go

    occ = occ.sort_values("width")
    fig = go.Figure()
    for col, scale, name, color, dash in (
        ("theoretical_occupancy_tw_pct", 1, "theoretical occupancy", "theoretical", "dot"),
        ("achieved_occupancy_tw_pct", 1, "achieved occupancy", "achieved", "solid"),
        ("sm_coverage_tw", 100, "SM coverage (block slots filled)", "grid", "solid"),
        ("tensor_core_time_share", 100, "tensor-core share of kernel time", "tensor_core_conv",
         "dash"),
    ):
        fig.add_scatter(x=occ.width, y=occ[col] * scale, name=name, mode="lines+markers",
                        line={"color": COLORS[color], "dash": dash},
                        hovertemplate=f"width %{{x}}<br>{name}: %{{y:.1f}} %<extra></extra>")
    fig.update_layout(
        template=TEMPLATE, xaxis_title="width multiplier", yaxis_title="percent (%)",
        yaxis_range=[0, 105],
        title=title or "Occupancy per width, time-weighted over one forward (Nsight Compute)")
    return finish(fig)
# fmt: on


_METRICS = {
    "time_share_pct": "share of kernel time (%)",
    "theoretical_occupancy_tw_pct": "theoretical occupancy (%)",
    "achieved_occupancy_tw_pct": "achieved occupancy (%)",
    "tensor_pipe_tw_pct": "tensor pipe busy (%)",
}


def _metric_lines(d, metrics, color, hover, title, **kw):
    """A panel per :data:`_METRICS` column against width, a line per ``color``."""
    import plotly.express as px

    long = d.melt(id_vars=["width", color, *hover], value_vars=metrics, var_name="metric",
                  value_name="pct").assign(metric=lambda x: x.metric.map(_METRICS))  # fmt: skip
    fig = px.line(long.sort_values("width"), x="width", y="pct", color=color, facet_col="metric",
                  markers=True, hover_data=hover, template=TEMPLATE, title=title, **kw)  # fmt: skip
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(range=[0, 105])
    fig.update_yaxes(title_text="percent (%)", col=1)
    return finish(fig, "width multiplier")


def plot_class_occupancy(cls, *, title=None):
    """Per kernel class against width: time share and time-weighted occupancy."""
    metrics = ["time_share_pct", "theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct"]
    return _metric_lines(
        cls.assign(time_share_pct=cls.time_share * 100), metrics, "kernel_class",
        ["kernels", "time_us"], title or "Per kernel class: time share and occupancy vs width",
        color_discrete_map=color_map(cls.kernel_class.unique()),
    )  # fmt: skip


def plot_wide_stack(tab, *, title=None):
    """Per kernel family of the wide conv stack against width: occupancy and tensor pipe."""
    metrics = ["theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct", "tensor_pipe_tw_pct"]
    fig = _metric_lines(
        tab, metrics, "kernel_family", ["limiter", "kernels", "time_us", "time_share"],
        title or "Wide conv stack: occupancy and tensor-pipe use per kernel family",
        line_dash="kernel_family",
    )  # fmt: skip
    return fig.update_layout(legend={"orientation": "h", "y": -0.25}, height=520)


def plot_precision_speedup(ratios, *, baseline: str = "fp32", title=None):
    """Same-run speed-up over ``baseline`` against batch, a line per precision, panels width x
    backend."""
    import plotly.express as px

    d = ratios.sort_values(["precision", "batch"])
    fig = px.line(
        d,
        x="batch",
        y="ratio",
        color="precision",
        line_dash="precision",
        symbol="precision",
        facet_col="width",
        facet_row="backend",
        markers=True,
        log_x=True,
        log_y=True,
        hover_data=["layout", "width", "batch"],
        category_orders={"precision": list(PRECISION_ORDER)},
        color_discrete_map=color_map(d.precision.unique()),
        template=TEMPLATE,
        title=title
        or f"Speed-up over {baseline} measured in the same run (latency {baseline} / latency x)",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.for_each_annotation(lambda a: a.update(text=a.text.replace("=", " ")))
    fig.update_yaxes(title_text="")
    fig.update_yaxes(title_text=f"speed-up over {baseline}", col=1)
    fig.update_xaxes(tickvals=sorted(d.batch.unique()), title_text="")
    fig.update_xaxes(title_text="batch size", row=1)
    # fp16 and bf16 run the same kernels at nearly the same speed: dashes and symbols keep
    # the line drawn first visible under the second
    fig.update_traces(line_width=2.5, marker_size=7, opacity=0.85)
    fig.update_layout(height=560)
    return finish(fig)


def plot_precision_forward(fwd, *, title=None):
    """Per config: GPU kernel time per forward (ms) and time-weighted occupancy (%)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("GPU kernel time per forward (ms)", "time-weighted occupancy (%)"),
    )
    labels = fwd.precision + " " + fwd.layout.str.upper()
    fig.add_bar(
        x=labels,
        y=fwd.time_ms,
        marker_color=[COLORS.get(p, "#7F7F7F") for p in fwd.precision],
        name="time per forward",
        hovertemplate="%{x}: %{y:.2f} ms<extra></extra>",
        row=1,
        col=1,
    )
    for name in ("theoretical", "achieved"):
        fig.add_bar(
            x=labels,
            y=fwd[f"{name}_occupancy_tw_pct"],
            name=f"{name} occupancy",
            marker_color=COLORS[name],
            legendgroup=name,
            hovertemplate=f"%{{x}}: {name} %{{y:.1f}} %<extra></extra>",
            row=1,
            col=2,
        )
    fig.update_layout(
        template=TEMPLATE,
        barmode="group",
        title=title or f"Per precision and layout, {_one_model(fwd)} (Nsight Compute)",
    )
    fig.update_xaxes(title_text="precision and layout")
    fig.update_yaxes(title_text="GPU time per forward (ms)", col=1)
    fig.update_yaxes(title_text="occupancy (%)", col=2)
    return finish(fig)


def _one_model(df) -> str:
    """``"width 1 batch 8"`` from a table's width and batch columns (ranges where they vary)."""
    parts = []
    for col in ("width", "batch"):
        if col in df and df[col].notna().any():
            lo, hi = df[col].min(), df[col].max()
            parts.append(f"{col} {lo:g}" if lo == hi else f"{col} {lo:g}-{hi:g}")
    return " ".join(parts)


def plot_precision_class_shares(ncu, *, title=None):
    """Share of GPU kernel time by kernel class per precision and layout (one bar per config)."""
    return plot_class_shares(
        precision_class_shares(ncu),
        y="config",
        title=title or f"Share of GPU kernel time by kernel class, {_one_model(with_config(ncu))}",
    )


def plot_rel_err(*sweeps, title=None):
    """Every sweep point's ``rel_err`` per precision (log), each precision's tolerance as a dash."""
    import plotly.express as px

    d = pd.concat([ok_rows(s) for s in sweeps if s is not None], ignore_index=True)
    d = d[d.rel_err > 0]  # fp32 against itself is exactly 0: not on a log axis
    fig = px.strip(
        d,
        x="precision",
        y="rel_err",
        color="layout",
        hover_data=["width", "batch", "backend"],
        category_orders={"precision": [p for p in PRECISION_ORDER if p in set(d.precision)]},
        color_discrete_map=color_map(d.layout.unique()),
        log_y=True,
        template=TEMPLATE,
        title=title or "Relative L2 error vs eager fp32, per sweep point",
    )
    for p in d.precision.unique():
        fig.add_scatter(
            x=[p],
            y=[tolerance(p)],
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 40, "color": "black"},
            name="tolerance",
            showlegend=bool(p == d.precision.unique()[0]),
            hovertemplate=f"{p} tolerance %{{y:g}}<extra></extra>",
        )
    return finish(fig, y="relative L2 error (log)")


def plot_presets(table, *, batch: int = 64, title=None):
    """img/s against GFLOPs per image at one batch, a line per family, panels precision x
    backend."""
    import plotly.express as px

    d = table[(table.batch == batch) & (table.status == "ok")]
    fig = px.line(
        d, x="gflops_per_img", y="img_per_s", color="family", text="scale", facet_col="backend",
        facet_row="precision", markers=True, log_x=True, log_y=True, template=TEMPLATE,
        hover_data=["width", "depth", "median_ms", "tflops", "peak_frac"],
        title=title or f"Standard presets, batch {batch}: img/s vs GFLOPs per image",
    )  # fmt: skip
    fig.update_traces(textposition="top center")
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return finish(fig, "GFLOPs per image", "images per second")


def plot_compile_by_width(bench, title=None):
    """The bench's CUDA graph and torch.compile rows over eager against width."""
    return plot_speedup_vs_width(
        bench[bench.variant.isin(list(COMPILE_VARIANTS))],
        title=title or "torch.compile and CUDA graph over eager fp16 NHWC (same unit) vs width",
    )


def peak_sentence(peak: float) -> str:
    """Where the share-of-peak figures come from (the root's fp16 matmul ceiling, or none)."""
    if peak != peak:  # NaN
        return "This root holds no measured fp16 matmul ceiling (ceilings): no share of peak."
    return f"fp16 peak: {peak:,.0f} TFLOP/s, the root's own dense fp16 matmul (ceilings)."

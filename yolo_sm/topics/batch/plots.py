"""Figures of notebook 03 (batch size): throughput and latency curves, the knee, the CUDA-graph
speed-up, SM coverage per batch, GPM medians, memory lines, and a JupyterLab explorer. Each
function takes tables of :mod:`yolo_sm.topics.batch.analyse` and returns a figure (or a widget)."""

from __future__ import annotations

from yolo_sm.contract.labels import with_config
from yolo_sm.report import tables
from yolo_sm.report.colors import COLORS, TEMPLATE
from yolo_sm.report.style import finish
from yolo_sm.topics.batch.analyse import GPM_METRICS, batch_table, parse_config, saturation

# fmt: off

GPM_LABELS = {
    "sm_util_pct": "SM util (%)", "sm_occupancy_pct": "SM occupancy (%)",
    "tensor_util_pct": "tensor util (%)", "dram_bw_util_pct": "DRAM BW util (%)",
}


def short_label(label: str, vary: str = "batch") -> str:
    """``b16`` or ``w1.5`` for shading and legends ('' for unparseable labels)."""
    p = parse_config(label)
    if p[vary] != p[vary]:  # NaN
        return ""
    return f"b{p['batch']}" if vary == "batch" else f"w{p['width']:g}"


def plot_batch_curves(table, title: str | None = None):
    """img/s and latency against batch per width, eager and CUDA graph; log axes."""
    import plotly.express as px

    long = table.assign(width=table["width"].map("{:g}".format)).melt(
        id_vars=["width", "backend", "batch"], value_vars=["img_per_s", "median_ms"],
        var_name="metric", value_name="value",
    )
    fig = px.line(
        long, x="batch", y="value", color="width", facet_col="backend", facet_row="metric",
        markers=True, log_x=True, log_y=True,
        category_orders={"metric": ["img_per_s", "median_ms"], "backend": ["eager", "cudagraph"]},
        color_discrete_sequence=px.colors.sequential.Viridis, template=TEMPLATE,
        title=title or "Throughput and latency vs batch", height=650,
    )
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.update_yaxes(title_text="img/s", row=2, col=1)
    fig.update_yaxes(title_text="latency per batch (ms)", row=1, col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return finish(fig)


def plot_batch_detail(table, width: float, backend: str, frac: float):
    """One (width, backend): img/s bars and latency line against batch, the knee marked."""
    from plotly.subplots import make_subplots

    g = table[(table["width"] == width) & (table["backend"] == backend)].sort_values("batch")
    if g.empty:
        raise ValueError(f"no ok rows for width {width} backend {backend}")
    knee = saturation(g, frac)["knee_batch"].iloc[0]
    x = g["batch"].astype(str)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_bar(
        x=x,
        y=g["img_per_s"],
        name="img/s",
        marker_color=[COLORS.get(backend, "#636EFA") if b != knee else "#2CA02C" for b in g.batch],
        hovertemplate="batch %{x}<br>%{y:.0f} img/s<extra></extra>",
    )
    fig.add_scatter(
        x=x, y=g["median_ms"], name="latency (ms)", mode="lines+markers", line_color="black",
        secondary_y=True, hovertemplate="batch %{x}<br>%{y:.2f} ms<extra></extra>",
    )
    fig.update_layout(
        template=TEMPLATE,
        title=f"width {width:g}, {backend}: green bar = smallest batch reaching "
        f"{frac:.0%} of the best img/s",
        xaxis_title="batch",
    )
    fig.update_yaxes(title_text="img/s", secondary_y=False)
    fig.update_yaxes(title_text="latency per batch (ms)", rangemode="tozero", secondary_y=True)
    return finish(fig)


def plot_graph_speedup(speedup):
    """Eager / CUDA-graph latency per batch, one line per width."""
    import plotly.express as px

    d = speedup.assign(width=speedup["width"].map("{:g}".format))
    fig = px.line(
        d, x="batch", y="speedup", color="width", markers=True, log_x=True,
        color_discrete_sequence=px.colors.sequential.Viridis, hover_data=["eager", "cudagraph"],
        template=TEMPLATE, title="CUDA graph speed-up over eager (eager ms / graph ms, same sweep)",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_yaxes(title_text="eager latency / graph latency")
    return finish(fig)


def batch_explorer(sweep, width: float, backend: str, frac: float):
    """JupyterLab explorer of :func:`plot_batch_detail` by width and backend."""
    import ipywidgets as W
    from IPython.display import display

    table = batch_table(sweep)
    wd = W.Dropdown(options=sorted(table["width"].unique()), value=width, description="width")
    bd = W.Dropdown(options=sorted(table["backend"].unique()), value=backend, description="backend")
    out = W.Output()

    def update(*_):
        with out:
            out.clear_output(wait=True)
            display(plot_batch_detail(table, wd.value, bd.value, frac))
            g = table[(table["width"] == wd.value) & (table["backend"] == bd.value)]
            display(tables.show(g.drop(columns=["imgsz", "width", "backend"])))

    wd.observe(update, names="value")
    bd.observe(update, names="value")
    update()
    return W.VBox([W.HBox([wd, bd]), out])


def plot_waves_ecdf(ncu):
    """Share of kernel time in kernels of at most x waves per SM, one curve per batch."""
    import plotly.express as px

    d = with_config(ncu).sort_values("batch")
    d = d.assign(batch=d["batch"].astype(str))
    fig = px.ecdf(
        d, x="waves_per_sm", y="duration_us", color="batch", ecdfnorm="probability", log_x=True,
        template=TEMPLATE,
        title="Share of kernel time in kernels with at most x waves per SM (Nsight Compute)",
    )
    fig.add_vline(x=1.0, line_dash="dot", annotation_text="one wave")
    fig.update_layout(xaxis_title="waves per SM", yaxis_title="share of kernel time")
    return finish(fig)


def plot_occupancy_by_batch(coverage):
    """Time-weighted occupancy per batch, and the kernel time under one wave."""
    import plotly.express as px

    long = coverage.assign(batch=coverage["batch"].astype(str)).melt(
        id_vars=["batch"], value_vars=["theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct"],
        var_name="occupancy", value_name="pct",
    )
    long["occupancy"] = long["occupancy"].str.split("_").str[0]
    fig = px.bar(
        long, x="batch", y="pct", color="occupancy", barmode="group", template=TEMPLATE,
        title="Time-weighted occupancy per batch (Nsight Compute)",
    )
    fig.add_scatter(
        x=coverage["batch"].astype(str), y=100 * coverage["time_under_1_wave"],
        mode="lines+markers", name="kernel time under one wave (%)", line_color="black",
    )
    fig.update_layout(yaxis_title="percent", yaxis_range=[0, 100])
    return finish(fig)


def plot_gpm_by(medians, x: str = "batch", title: str | None = None):
    """GPM medians per config against ``x`` (batch or width), one line per metric."""
    import plotly.express as px

    metrics = [m for m in GPM_METRICS if m in medians]
    long = medians.melt(id_vars=[x], value_vars=metrics, var_name="metric", value_name="pct")
    long["metric"] = long["metric"].map(GPM_LABELS)
    fig = px.line(
        long, x=x, y="pct", color="metric", markers=True, log_x=x == "batch", template=TEMPLATE,
        title=title or f"GPM medians over each run vs {x}",
    )
    fig.update_layout(yaxis_title="percent (median of ~0.1 s windows)", yaxis_range=[0, 100])
    return finish(fig)


def plot_memory(table, fit):
    """Peak memory against batch and the fitted lines, a panel per (size, backend); log axes."""
    import plotly.express as px

    d = table.dropna(subset=["peak_mem_bytes"]).assign(
        gb=lambda x: x.peak_mem_bytes / 1e9, w=lambda x: x.width.map("{:g}".format)
    )
    sizes, widths = sorted(d.imgsz.unique()), sorted(d.width.unique())
    palette = px.colors.sample_colorscale(
        "Viridis", [i / max(1, len(widths) - 1) for i in range(len(widths))]
    )
    cmap = {f"{w:g}": c for w, c in zip(widths, palette, strict=True)}
    fig = px.scatter(
        d, x="batch", y="gb", color="w", facet_col="backend", facet_row="imgsz", log_x=True,
        log_y=True, color_discrete_map=cmap, hover_data=["width", "backend", "median_ms"],
        category_orders={"backend": ["eager", "cudagraph"], "imgsz": sizes, "w": list(cmap)},
        labels={"w": "width"}, template=TEMPLATE, height=350 * len(sizes) + 100,
        title="Peak GPU memory during the timed forwards vs batch: measured (dots), fitted lines",
    )
    for ri, size in enumerate(sizes):  # px puts the first facet row on top
        bs = sorted(d[d.imgsz == size].batch.unique())
        for ci, be in enumerate(("eager", "cudagraph"), start=1):
            for r in fit[(fit.imgsz == size) & (fit.backend == be)].itertuples():
                y = [(r.intercept_bytes + r.per_image_bytes * b) / 1e9 for b in bs]
                fig.add_scatter(
                    x=bs, y=y, mode="lines", showlegend=False, hoverinfo="skip",
                    line={"color": cmap[f"{r.width:g}"], "width": 1}, row=len(sizes) - ri, col=ci,
                )
    fig.update_yaxes(title_text="GB (10⁹ bytes)", col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return finish(fig)

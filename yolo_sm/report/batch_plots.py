"""batch_plots: split from analyse.batch."""

from __future__ import annotations

from yolo_sm.analyse.batch import (
    GPM_METRICS,
    batch_table,
    gpm_wide,
    kernel_gaps,
    parse_config,
    run_spans,
    saturation,
)
from yolo_sm.contract.labels import with_config
from yolo_sm.report.colors import COLORS, KERNEL_CLASS_COLORS, TEMPLATE

GPM_LABELS = {
    "sm_util_pct": "SM util (%)",
    "sm_occupancy_pct": "SM occupancy (%)",
    "tensor_util_pct": "tensor util (%)",
    "dram_bw_util_pct": "DRAM BW util (%)",
}


def short_label(label: str, vary: str = "batch") -> str:
    """``b16`` or ``w1.5`` for shading and legends ('' for unparseable labels)."""
    p = parse_config(label)
    if p[vary] != p[vary]:  # NaN
        return ""
    return f"b{p['batch']}" if vary == "batch" else f"w{p['width']:g}"


def plot_batch_curves(table, title: str | None = None):
    """img/s (top) and latency (bottom) against batch, one line per width, eager and CUDA graph
    side by side; log axes."""
    import plotly.express as px

    long = table.assign(width=table["width"].map("{:g}".format)).melt(
        id_vars=["width", "backend", "batch"],
        value_vars=["img_per_s", "median_ms"],
        var_name="metric",
        value_name="value",
    )
    fig = px.line(
        long,
        x="batch",
        y="value",
        color="width",
        facet_col="backend",
        facet_row="metric",
        markers=True,
        log_x=True,
        log_y=True,
        category_orders={"metric": ["img_per_s", "median_ms"], "backend": ["eager", "cudagraph"]},
        color_discrete_sequence=px.colors.sequential.Viridis,
        template=TEMPLATE,
        title=title or "Throughput and latency vs batch",
        height=650,
    )
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.update_yaxes(title_text="img/s", row=2, col=1)
    fig.update_yaxes(title_text="latency per batch (ms)", row=1, col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return fig


def plot_batch_detail(table, width: float, backend: str, frac: float = 0.9):
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
        x=x,
        y=g["median_ms"],
        name="latency (ms)",
        mode="lines+markers",
        line_color="black",
        secondary_y=True,
        hovertemplate="batch %{x}<br>%{y:.2f} ms<extra></extra>",
    )
    fig.update_layout(
        template=TEMPLATE,
        title=f"width {width:g}, {backend}: green bar = smallest batch reaching "
        f"{frac:.0%} of the best img/s",
        xaxis_title="batch",
    )
    fig.update_yaxes(title_text="img/s", secondary_y=False)
    fig.update_yaxes(title_text="latency per batch (ms)", rangemode="tozero", secondary_y=True)
    return fig


def plot_graph_speedup(speedup):
    """Eager / CUDA-graph latency per batch, one line per width."""
    import plotly.express as px

    d = speedup.assign(width=speedup["width"].map("{:g}".format))
    fig = px.line(
        d,
        x="batch",
        y="speedup",
        color="width",
        markers=True,
        log_x=True,
        color_discrete_sequence=px.colors.sequential.Viridis,
        hover_data=["eager", "cudagraph"],
        template=TEMPLATE,
        title="CUDA graph speed-up over eager (eager ms / graph ms, same sweep)",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_yaxes(title_text="eager latency / graph latency")
    return fig


def batch_explorer(sweep, width: float = 1.0, backend: str = "eager", frac: float = 0.9):
    """JupyterLab explorer: width and backend dropdowns -> :func:`plot_batch_detail` and the
    rows behind it."""
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
            display(g.drop(columns=["imgsz", "width", "backend"]).round(3))

    wd.observe(update, names="value")
    bd.observe(update, names="value")
    update()
    return W.VBox([W.HBox([wd, bd]), out])


def plot_waves_ecdf(ncu):
    """Share of kernel time in kernels of at most x waves per SM, one curve per batch; the line at
    one wave separates launches that cannot cover every SM."""
    import plotly.express as px

    d = with_config(ncu).sort_values("batch")
    d = d.assign(batch=d["batch"].astype(str))
    fig = px.ecdf(
        d,
        x="waves_per_sm",
        y="duration_us",
        color="batch",
        ecdfnorm="probability",
        log_x=True,
        template=TEMPLATE,
        title="Share of kernel time in kernels with at most x waves per SM (Nsight Compute)",
    )
    fig.add_vline(x=1.0, line_dash="dot", annotation_text="one wave")
    fig.update_layout(xaxis_title="waves per SM", yaxis_title="share of kernel time")
    return fig


def plot_occupancy_by_batch(coverage):
    """Time-weighted theoretical and achieved occupancy per batch, and the kernel time under one
    wave."""
    import plotly.express as px

    long = coverage.assign(batch=coverage["batch"].astype(str)).melt(
        id_vars=["batch"],
        value_vars=["theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct"],
        var_name="occupancy",
        value_name="pct",
    )
    long["occupancy"] = long["occupancy"].str.split("_").str[0]
    fig = px.bar(
        long,
        x="batch",
        y="pct",
        color="occupancy",
        barmode="group",
        template=TEMPLATE,
        title="Time-weighted occupancy per batch (Nsight Compute)",
    )
    fig.add_scatter(
        x=coverage["batch"].astype(str),
        y=100 * coverage["time_under_1_wave"],
        mode="lines+markers",
        name="kernel time under one wave (%)",
        line_color="black",
    )
    fig.update_layout(yaxis_title="percent", yaxis_range=[0, 100])
    return fig


def plot_gpm_by(medians, x: str = "batch", title: str | None = None):
    """GPM medians per config against ``x`` (batch or width), one line per metric."""
    import plotly.express as px

    metrics = [m for m in GPM_METRICS if m in medians]
    long = medians.melt(id_vars=[x], value_vars=metrics, var_name="metric", value_name="pct")
    long["metric"] = long["metric"].map(GPM_LABELS)
    fig = px.line(
        long,
        x=x,
        y="pct",
        color="metric",
        markers=True,
        log_x=x == "batch",
        template=TEMPLATE,
        title=title or f"GPM medians over each run vs {x}",
    )
    fig.update_layout(yaxis_title="percent (median of ~0.1 s windows)", yaxis_range=[0, 100])
    return fig


def graph_memory_findings(gm, source: str) -> str:
    """One markdown bullet from :func:`graph_memory`: whether a CUDA graph needs less memory
    than eager once its private pool is counted."""
    if gm.empty:
        return f"- **CUDA graph memory:** no graph rows with their pool in {source}."
    same_max = gm["max_batch"].nunique() == 1
    at = f"batch {int(gm['max_batch'].iloc[0])}" if same_max else "the largest batch"
    fixed = gm.graph_intercept_MB / gm.eager_intercept_MB
    return (
        f"- **CUDA graph memory, its private pool counted** ({source}, widths "
        f"{gm.width.min():g}-{gm.width.max():g}): one more image costs "
        f"{_rng(gm.per_image_ratio, '{:.2f}')}x in a graph what it costs eagerly (median "
        f"{gm.per_image_ratio.median():.2f}x; eager {_rng(gm.eager_per_image_MB)} MB, graph "
        f"{_rng(gm.graph_per_image_MB)} MB per image), and the fixed part is "
        f"{_rng(fixed, '{:.1f}')}x eager's. The pool is memory the capture reserved (whole "
        f"allocator segments), so it includes rounding that eager's peak of allocated bytes "
        f"does not. At {at} a graph holds {_rng(gm.footprint_ratio_at_max, '{:.2f}')}x the "
        f"eager peak. A graph does not save memory: the peak over its replays only looks small "
        f"because its activations were allocated during capture."
    )


def plot_memory(table, fit, claim_per_image_bytes: float | None = None, claim_imgsz: int = 640):
    """Measured peak memory against batch (dots) and the fitted lines, one panel per (image
    size, backend), colour by width; the claimed per-image memory x batch on the
    ``claim_imgsz`` panels. Log axes."""
    import plotly.express as px

    d = table.dropna(subset=["peak_mem_bytes"]).assign(
        gb=lambda x: x["peak_mem_bytes"] / 1e9,
        w=lambda x: x["width"].map("{:g}".format),
    )
    sizes = sorted(d["imgsz"].unique())
    widths = sorted(d["width"].unique())
    palette = px.colors.sample_colorscale(
        "Viridis", [i / max(1, len(widths) - 1) for i in range(len(widths))]
    )
    cmap = {f"{w:g}": c for w, c in zip(widths, palette, strict=True)}
    fig = px.scatter(
        d,
        x="batch",
        y="gb",
        color="w",
        facet_col="backend",
        facet_row="imgsz",
        log_x=True,
        log_y=True,
        category_orders={"backend": ["eager", "cudagraph"], "imgsz": sizes, "w": list(cmap)},
        color_discrete_map=cmap,
        hover_data=["width", "backend", "median_ms"],
        labels={"w": "width"},
        template=TEMPLATE,
        title="Peak GPU memory during the timed forwards vs batch: measured (dots), fitted lines",
        height=350 * len(sizes) + 100,
    )
    # px puts the first facet row on top; subplot row numbers count from the bottom
    for ri, size in enumerate(sizes):
        row = len(sizes) - ri
        for ci, be in enumerate(("eager", "cudagraph"), start=1):
            bs = sorted(d[d["imgsz"] == size]["batch"].unique())
            for r in fit[(fit["imgsz"] == size) & (fit["backend"] == be)].itertuples():
                fig.add_scatter(
                    x=bs,
                    y=[(r.intercept_bytes + r.per_image_bytes * b) / 1e9 for b in bs],
                    mode="lines",
                    line={"color": cmap[f"{r.width:g}"], "width": 1},
                    showlegend=False,
                    hoverinfo="skip",
                    row=row,
                    col=ci,
                )
            if claim_per_image_bytes and size == claim_imgsz:
                fig.add_scatter(
                    x=bs,
                    y=[claim_per_image_bytes * b / 1e9 for b in bs],
                    mode="lines",
                    line={"color": "black", "dash": "dash"},
                    name=f"claim: {claim_per_image_bytes / 1e9:g} GB x batch",
                    showlegend=ci == 1,
                    row=row,
                    col=ci,
                )
    fig.update_yaxes(title_text="GB (10⁹ bytes)", col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return fig


def plot_gpm_timeline(gpm, vary: str = "batch", title: str | None = None):
    """The four GPM metrics against time (one row each, a step per ~0.1 s window), each config's
    run phase shaded and labelled, idle gaps white; windows that straddle a marker change are
    drawn as open circles."""
    from plotly.subplots import make_subplots

    w = gpm_wide(gpm)
    metrics = [m for m in GPM_METRICS if m in w]
    fig = make_subplots(
        rows=len(metrics),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.03,
        subplot_titles=[GPM_LABELS[m] for m in metrics],
    )
    shades = ("#DCE6F7", "#F7E3DC")
    for i, s in run_spans(w).iterrows():
        fig.add_vrect(
            x0=s.t0_s,
            x1=s.t1_s,
            fillcolor=shades[i % 2],
            opacity=0.6,
            line_width=0,
            layer="below",
            row="all",
            col=1,
            exclude_empty_subplots=False,
        )
        fig.add_annotation(
            x=(s.t0_s + s.t1_s) / 2,
            y=1.0,
            yshift=28,
            xref="x",
            yref="paper",
            yanchor="bottom",
            text=f"<b>{short_label(s.config, vary)}</b>",
            showarrow=False,
        )
    straddle = w["straddles_mark"].astype(bool)
    for row, m in enumerate(metrics, start=1):
        fig.add_scatter(
            x=w["t_s"],
            y=w[m],
            mode="lines",
            line_shape="vh",
            line={"color": "#444", "width": 1.2},
            name=GPM_LABELS[m],
            showlegend=False,
            customdata=w[["config", "phase"]],
            hovertemplate="%{customdata[0]} %{customdata[1]}<br>t=%{x:.2f} s: %{y:.1f} %"
            "<extra></extra>",
            row=row,
            col=1,
        )
        fig.add_scatter(
            x=w.loc[straddle, "t_s"],
            y=w.loc[straddle, m],
            mode="markers",
            marker={"symbol": "circle-open", "color": "#D62728", "size": 7},
            name="window straddles a marker",
            showlegend=row == 1,
            hoverinfo="skip",
            row=row,
            col=1,
        )
        fig.update_yaxes(range=[0, 105], row=row, col=1)
    fig.update_xaxes(title_text="time since sampler start (s)", row=len(metrics), col=1)
    fig.update_layout(
        template=TEMPLATE,
        height=200 * len(metrics) + 120,
        title=title or "GPM timeline",
        margin={"t": 110},
        legend={"orientation": "h", "y": -0.08},
    )
    return fig


def plot_kernel_timeline(trace, iteration: int = 0, max_configs: int = 4):
    """One row per config: each kernel as a bar from its start to its end (ms from the forward's
    first kernel), coloured by kernel class; the white space between bars is GPU idle time."""
    import plotly.graph_objects as go

    d = trace[trace["iteration"] == iteration]
    configs = sorted(d["config"].unique(), key=lambda c: parse_config(c)["batch"])[:max_configs]
    fig = go.Figure()
    seen = set()
    for c in configs:
        g = d[d["config"] == c].sort_values("start_us")
        t0 = g["start_us"].min()
        for cls, k in g.groupby("kernel_class"):
            fig.add_bar(
                y=[short_label(c)] * len(k),
                x=k["duration_us"] / 1000,
                base=(k["start_us"] - t0) / 1000,
                orientation="h",
                marker_color=KERNEL_CLASS_COLORS.get(cls, "#7F7F7F"),
                marker_line_width=0,
                name=cls,
                legendgroup=cls,
                showlegend=cls not in seen,
                customdata=k["kernel_name"].str.slice(0, 70),
                hovertemplate="%{customdata}<br>start %{base:.3f} ms, %{x:.4f} ms<extra></extra>",
            )
            seen.add(cls)
    fig.update_layout(
        template=TEMPLATE,
        barmode="overlay",
        bargap=0.3,
        title=f"Kernels of one eager forward on the GPU (Kineto, iteration {iteration})",
        xaxis_title="ms since the forward's first kernel",
        yaxis_title="config",
        height=450,
    )
    return fig


def plot_gap_hist(trace):
    """Cumulative distribution of the gaps between consecutive kernels of a forward, per batch
    (log x; gaps under 0.5 µs are drawn at 0.5 µs: back to back)."""
    import plotly.express as px

    d = kernel_gaps(trace).dropna(subset=["gap_us"])
    d = with_config(d).sort_values("batch")
    d = d.assign(batch=d["batch"].astype(str), gap_us=d["gap_us"].clip(lower=0.5))
    fig = px.ecdf(
        d,
        x="gap_us",
        color="batch",
        log_x=True,
        template=TEMPLATE,
        title="Gaps between consecutive kernels: share of gaps at most x µs (Kineto)",
    )
    fig.update_layout(
        xaxis_title="gap from the previous kernel's end to this kernel's start (µs)",
        yaxis_title="share of gaps",
    )
    return fig


def _rng(s, fmt: str = "{:.0f}") -> str:
    lo, hi = float(s.min()), float(s.max())
    return (
        fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"
    )


def batch_findings(sat, speedup, coverage, gpm_med, rule, frac: float = 0.9, build=None) -> str:
    """Markdown findings of notebook 03 from its tables (saturation, graph speed-up, Nsight
    Compute coverage, GPM medians, memory rule, and :func:`build_vs_timed` when given)."""
    s640 = sat[sat["imgsz"] == 640].sort_values("width")
    lines = []
    for be in ("eager", "cudagraph"):
        s = s640[s640["backend"] == be]
        lo, hi = s.iloc[0], s.iloc[-1]
        lines.append(
            f"- **Saturation ({be}, 640 px).** The smallest batch reaching {frac:.0%} of the best "
            f"img/s is {int(lo.knee_batch)} at width {lo.width:g} and {int(hi.knee_batch)} at "
            f"width {hi.width:g} (knees over all widths: "
            f"{', '.join(f'w{r.width:g}: b{int(r.knee_batch)}' for r in s.itertuples())}). "
            f"Batch 1 to the best batch multiplies img/s by {_rng(s.gain_b1_to_best, '{:.1f}')}x; "
            f"the best is {_rng(s.best_img_per_s)} img/s."
        )
    sp = speedup[speedup["imgsz"] == 640]
    b1, big = sp[sp["batch"] == 1], sp[sp["batch"] >= 32]
    lines.append(
        f"- **CUDA graph.** At batch 1 one graph replay is {_rng(b1.speedup, '{:.2f}')}x faster "
        f"than eager (eager {_rng(b1.eager, '{:.2f}')} ms whatever the width, graph "
        f"{_rng(b1.cudagraph, '{:.2f}')} ms growing with width); from batch 32 up the ratio is "
        f"{_rng(big.speedup, '{:.2f}')}x: the GPU work hides the launches."
    )
    c1, cN = coverage.iloc[0], coverage.iloc[-1]
    lines.append(
        f"- **SM coverage (Nsight Compute, width 1.0).** At batch {int(c1.batch)} "
        f"{c1.kernels_under_1_wave:.0%} of the kernels ({c1.time_under_1_wave:.0%} of kernel "
        f"time) launch under one wave (median {c1.median_waves:.2f} waves per SM), so most SMs "
        f"sit idle during them; at batch {int(cN.batch)} it is {cN.kernels_under_1_wave:.0%} of "
        f"kernels (median {cN.median_waves:.1f} waves). Time-weighted theoretical occupancy "
        f"barely moves ({c1.theoretical_occupancy_tw_pct:.0f} % -> "
        f"{cN.theoretical_occupancy_tw_pct:.0f} %: the launch configurations are the same) while "
        f"achieved occupancy rises {c1.achieved_occupancy_tw_pct:.0f} % -> "
        f"{cN.achieved_occupancy_tw_pct:.0f} % ({c1.achieved_over_theoretical:.0%} -> "
        f"{cN.achieved_over_theoretical:.0%} of theoretical)."
    )
    g1, gN = gpm_med.iloc[0], gpm_med.iloc[-1]
    lines.append(
        f"- **GPM (whole GPU, width 1.0, eager loop).** Median SM utilisation "
        f"{g1.sm_util_pct:.0f} % at batch {int(g1.batch)} -> {gN.sm_util_pct:.0f} % at batch "
        f"{int(gN.batch)}; SM occupancy {g1.sm_occupancy_pct:.0f} % -> "
        f"{gN.sm_occupancy_pct:.0f} %; tensor utilisation {g1.tensor_util_pct:.0f} % -> "
        f"{gN.tensor_util_pct:.0f} %."
    )
    e640 = rule[(rule["imgsz"] == 640) & (rule["backend"] == "eager")].sort_values("width")
    w1 = e640.loc[(e640["width"] - 1.0).abs().idxmin()]
    e1280 = rule[(rule["imgsz"] == 1280) & (rule["backend"] == "eager")]
    w1280 = e1280[e1280["width"] == w1.width]
    r1280 = (
        f" At 1280 px (4x the pixels) width {w1.width:g} eager needs "
        f"{w1280.per_image_bytes.iloc[0] / 1e6:.0f} MB per image, "
        f"{w1280.per_image_bytes.iloc[0] / w1.per_image_bytes:.1f}x its 640-px figure."
        if len(w1280)
        else ""
    )
    lines.append(
        f"- **Memory rule.** The claim's {int(w1.claim_safe_batch)} images "
        f"(floor({w1.budget_frac:g} x GPU memory / per-image memory)) rests on a per-image figure "
        f"{_rng(e640.claim_over_fitted_per_image, '{:.0f}')}x the measured slope of eager "
        f"peak memory at 640 px ({_rng(e640.per_image_bytes / 1e6)} MB per image from width "
        f"{e640.width.min():g} to {e640.width.max():g}; a CUDA graph's timed peak leaves its "
        f"activations out, they live in its private pool). The widest model "
        f"at batch {int(e640.max_batch.max())} peaked at "
        f"{e640.peak_at_max_batch_bytes.max() / 1e9:.1f} GB, "
        f"{e640.measured_over_claim_at_max_batch.max():.0%} of what the claim predicts. "
        f"The same {w1.budget_frac:.0%} budget spent with the fitted line gives "
        f"{int(w1.fitted_safe_batch)} "
        f"images at width {w1.width:g}, an extrapolation far past the measured batches: "
        f"throughput saturates long before memory does.{r1280}"
    )
    if build is not None and len(build):
        top = build.loc[build["build_peak_mem_bytes"].idxmax()]
        lines.append(
            f"- **Building peaks higher than running.** The build peak exceeds the timed peak "
            f"in {(build.build_over_timed > 1).mean():.0%} of the points; the highest is "
            f"{top.build_peak_mem_bytes / 1e9:.1f} GB (width {top.width:g}, {top.backend}, batch "
            f"{int(top.batch)} at {int(top.imgsz)} px), {top.build_over_timed:.0f}x its timed "
            f"peak. cuDNN's autotuner tries algorithms whose workspaces can grow with the free "
            f"memory, so that peak says what was free, not what the model needs; a rule should "
            f"leave headroom for the build or build before co-located work starts."
        )
    return "**Findings (computed from the shipped tables).**\n\n" + "\n".join(lines)


def timeline_findings(med_batch, med_width, gaps_vs_sweep, gpm) -> str:
    """Markdown findings of notebook 05 from the GPM medians, the launch-gap table and a GPM
    frame (for the window lengths)."""
    w = gpm_wide(gpm)
    b1, bN = med_batch.iloc[0], med_batch.iloc[-1]
    n1, nN = med_width.iloc[0], med_width.iloc[-1]
    g = gaps_vs_sweep.sort_values("batch")
    r1 = g.iloc[0]
    lines = [
        f"- **GPM windows.** {len(w)} windows, median {w.window_s.median() * 1000:.0f} ms long: "
        f"one value per counter refresh, so anything shorter than that (a layer, a forward of "
        f"{r1.sweep_graph_ms:.1f} ms) is averaged away.",
        f"- **Batch (width 1.0).** Median SM utilisation {b1.sm_util_pct:.0f} % at batch "
        f"{int(b1.batch)} -> {bN.sm_util_pct:.0f} % at batch {int(bN.batch)}, SM occupancy "
        f"{b1.sm_occupancy_pct:.0f} % -> {bN.sm_occupancy_pct:.0f} %, DRAM bandwidth "
        f"{b1.dram_bw_util_pct:.0f} % -> {bN.dram_bw_util_pct:.0f} %.",
        f"- **Width (batch 16).** SM utilisation {n1.sm_util_pct:.0f} % at width {n1.width:g} -> "
        f"{nN.sm_util_pct:.0f} % at width {nN.width:g}; tensor utilisation "
        f"{n1.tensor_util_pct:.0f} % -> {nN.tensor_util_pct:.0f} %; SM occupancy peaks at "
        f"{med_width.sm_occupancy_pct.max():.0f} % (width "
        f"{med_width.loc[med_width.sm_occupancy_pct.idxmax(), 'width']:g}).",
        f"- **Launch gaps at batch {int(r1.batch)} (eager).** Under the profiler the "
        f"{r1.kernels:.0f} kernels of one forward add up to {r1.trace_kernel_us / 1000:.2f} ms of "
        f"GPU time inside a {r1.trace_span_us / 1000:.1f} ms span: the GPU idles "
        f"{r1.trace_idle_frac:.0%} of the forward (the profiler slows the host's launches). "
        f"Without it, eager takes {r1.sweep_eager_ms:.2f} ms, so the GPU still idles about "
        f"{r1.sweep_idle_frac:.0%}; one CUDA graph replay takes {r1.sweep_graph_ms:.2f} ms, "
        f"{r1.graph_over_kernel_time:.2f}x the summed kernel time: the graph removes the gaps, "
        f"a {r1.graph_speedup:.2f}x speed-up. At batch {int(g.iloc[-1].batch)} the idle share "
        f"is {g.iloc[-1].trace_idle_frac:.1%} under the profiler and the graph gains "
        f"{g.iloc[-1].graph_speedup:.2f}x.",
    ]
    return "**Findings (computed from the shipped tables).**\n\n" + "\n".join(lines)

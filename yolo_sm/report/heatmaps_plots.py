"""heatmaps_plots: split from analyse.heatmaps."""

from __future__ import annotations

from yolo_sm.analyse.heatmaps import (
    LIMITERS,
    PRECISION_ORDER,
    config_key,
    config_summary,
    kernels_of,
    layer_order,
    slowest_layer,
)
from yolo_sm.report.colors import KERNEL_CLASS_COLORS, TEMPLATE

LIMITER_COLORS = {
    "warps": "#2CA02C",
    "blocks": "#98DF8A",
    "registers": "#D62728",
    "shared_mem": "#9467BD",
    "grid": "#FF7F0E",
}


def _variant_key(v: str) -> tuple:
    prec, _, layout = str(v).partition(" ")
    return (PRECISION_ORDER.index(prec) if prec in PRECISION_ORDER else 99, prec, layout)


def _axis_values(table, x):
    vals = table[x].drop_duplicates()
    if x in ("width", "batch"):
        return sorted(vals)
    return sorted(vals, key=_variant_key) if x == "variant" else list(vals)


def _x_label(x, v):
    return {"width": f"w{v:g}", "batch": f"b{v}"}.get(x, str(v)) if x in ("width", "batch") else v


def _grid(table, value, x):
    """(layer labels in model order, x labels, z matrix rows=layers) for one value column."""
    labels = table.drop_duplicates("layer").sort_values("layer_idx").layer_label.tolist()
    xs = _axis_values(table, x)
    z = table.pivot_table(index="layer_label", columns=x, values=value, aggfunc="first")
    z = z.reindex(index=labels, columns=xs)
    return labels, [_x_label(x, v) for v in xs], z


_VALUE_TITLES = {
    "achieved_occupancy_tw_pct": "achieved occupancy (%, time-weighted)",
    "theoretical_occupancy_tw_pct": "theoretical occupancy (%, time-weighted)",
    "time_share": "share of forward kernel time",
    "sm_coverage_tw": "SM coverage (time-weighted)",
}


def plot_layer_heatmap(table, values=("achieved_occupancy_tw_pct",), *, x="width", title=None):
    """Heatmaps of layer (model order, top to bottom) x ``x`` (width, batch or variant), one
    panel per column of ``values``; panels share one colour scale. Cells show the value;
    hover adds the layer's kernels, time and main limiter."""
    import numpy as np
    from plotly.subplots import make_subplots

    values = [values] if isinstance(values, str) else list(values)
    share = all(v == "time_share" for v in values)
    fig = make_subplots(
        rows=1,
        cols=len(values),
        shared_yaxes=True,
        horizontal_spacing=0.03,
        subplot_titles=[_VALUE_TITLES.get(v, v) for v in values],
    )
    zmax = 100.0 if not share else float(np.nanmax(table[values].to_numpy()))
    for i, v in enumerate(values, start=1):
        labels, xs, z = _grid(table, v, x)
        extra = [_grid(table, c, x)[2].to_numpy() for c in ("kernels", "time_us", "main_limiter")]
        custom = np.dstack(extra)
        fmt = "%{z:.1%}" if v == "time_share" else "%{z:.0f}"
        fig.add_heatmap(
            z=z.to_numpy(),
            x=xs,
            y=labels,
            customdata=custom,
            coloraxis="coloraxis",
            texttemplate=fmt,
            textfont={"size": 10},
            hovertemplate=(
                f"%{{y}} · %{{x}}<br>{v}: {fmt}<br>kernels: %{{customdata[0]}}"
                "<br>time: %{customdata[1]:.1f} us<br>main limiter: %{customdata[2]}"
                "<extra></extra>"
            ),
            row=1,
            col=i,
        )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", title_text=x)
    fig.update_layout(
        template=TEMPLATE,
        height=max(450, 24 * table.layer.nunique() + 150),
        title=title,
        coloraxis={
            "colorscale": "Blues" if share else "RdYlGn",
            "cmin": 0,
            "cmax": zmax,
            "colorbar": {"tickformat": ".0%" if share else "", "title": "" if share else "%"},
        },
    )
    return fig


def plot_limiter_heatmap(table, *, x="width", column="main_limiter", title=None):
    """Categorical heatmap: the limiter holding most of each layer's kernel time, named in
    each cell with the share of the layer's time it holds (when the table has
    ``<column>_share``); hover adds the time-weighted theoretical and achieved occupancy."""
    import numpy as np

    show_share = f"{column}_share" in table
    labels, xs, cats = _grid(table, column, x)
    present = [c for c in LIMITERS if (cats == c).to_numpy().any()] or list(LIMITERS)
    code = {c: i for i, c in enumerate(present)}
    z = cats.apply(lambda s: s.map(code)).to_numpy(dtype=float)
    n = len(present)
    scale = []
    for i, c in enumerate(present):  # one flat band per category
        scale += [[i / n, LIMITER_COLORS[c]], [(i + 1) / n, LIMITER_COLORS[c]]]
    custom = np.dstack(
        [
            _grid(table, c, x)[2].to_numpy()
            for c in (
                "theoretical_occupancy_tw_pct",
                "achieved_occupancy_tw_pct",
                "time_share",
                f"{column}_share" if show_share else "time_share",
            )
        ]
    )
    import plotly.graph_objects as go

    text = cats.fillna("").astype(str).to_numpy()
    if show_share:
        shares = custom[:, :, 3].astype(float)
        text = np.array(
            [
                [f"{t} {s:.0%}" if t and s == s else t for t, s in zip(trow, srow, strict=True)]
                for trow, srow in zip(cats.fillna("").to_numpy(), shares, strict=True)
            ]
        )
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=xs,
            y=labels,
            text=text,
            texttemplate="%{text}",
            textfont={"size": 10},
            customdata=custom,
            colorscale=scale,
            zmin=-0.5,
            zmax=n - 0.5,
            colorbar={"tickvals": list(range(n)), "ticktext": present, "title": "limiter"},
            hovertemplate=(
                "%{y} · %{x}<br>main limiter: %{text}<br>theoretical %{customdata[0]:.0f} %"
                "<br>achieved %{customdata[1]:.0f} %<br>layer's share of the forward "
                "%{customdata[2]:.1%}<br>share of the layer's time under this limiter "
                "%{customdata[3]:.0%}"
                "<extra></extra>"
            ),
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", title_text=x)
    fig.update_layout(
        template=TEMPLATE,
        height=max(450, 24 * table.layer.nunique() + 150),
        title=title or "Main limiter per layer (the limiter of most of the layer's kernel time)",
    )
    return fig


def plot_limiter_shares(shares, *, x="width", title=None):
    """Stacked bars: share of the forward's kernel time under each limiter, per ``x``."""
    import plotly.express as px

    cols = [c for c in LIMITERS if c in shares]
    long = shares.assign(**{x: shares[x].map(lambda v: _x_label(x, v))}).melt(
        id_vars=[x], value_vars=cols, var_name="limiter", value_name="time_share"
    )
    fig = px.bar(
        long,
        x=x,
        y="time_share",
        color="limiter",
        color_discrete_map=LIMITER_COLORS,
        category_orders={"limiter": cols},
        template=TEMPLATE,
        title=title or "Share of forward kernel time per limiter",
    )
    fig.update_layout(yaxis_tickformat=".0%", yaxis_title="share of kernel time")
    fig.update_xaxes(type="category")
    return fig


def plot_kernels(ktable, *, title=None):
    """Drill-down figure: one bar per kernel (launch order) with its duration, coloured by
    kernel class; theoretical (open) and achieved (filled) occupancy as markers on the right
    axis."""
    import plotly.graph_objects as go

    k = ktable.reset_index(drop=True)
    xs = [str(i) for i in range(len(k))]  # launch order; the name is in the hover
    fig = go.Figure()
    for cls, g in k.groupby("kernel_class", sort=False):
        fig.add_bar(
            x=[xs[i] for i in g.index],
            y=g.duration_us,
            name=cls,
            marker_color=KERNEL_CLASS_COLORS.get(cls, "#7F7F7F"),
            customdata=g[
                [
                    "grid_size",
                    "block_size",
                    "registers_per_thread",
                    "limiter",
                    "waves_per_sm",
                    "kernel",
                ]
            ].to_numpy(),
            hovertemplate=(
                "#%{x} %{customdata[5]}<br>%{y:.1f} us<br>grid %{customdata[0]} x block "
                "%{customdata[1]}"
                "<br>%{customdata[2]} registers/thread<br>limiter %{customdata[3]}, "
                "%{customdata[4]} waves<extra></extra>"
            ),
        )
    for col, sym, name in (
        ("theoretical_occupancy_pct", "circle-open", "theoretical occupancy"),
        ("achieved_occupancy_pct", "circle", "achieved occupancy"),
    ):
        fig.add_scatter(
            x=xs,
            y=k[col],
            mode="markers",
            marker={"symbol": sym, "size": 10, "color": "black"},
            name=name,
            yaxis="y2",
            customdata=k.kernel,
            hovertemplate="#%{x} %{customdata}<br>" + name + " %{y:.1f} %<extra></extra>",
        )
    fig.update_layout(
        template=TEMPLATE,
        title=title,
        barmode="overlay",
        xaxis={
            "categoryorder": "array",
            "categoryarray": xs,
            "title": "kernel, in launch order (hover for its name)",
        },
        yaxis={"title": "duration (us)"},
        yaxis2={
            "title": "occupancy (%)",
            "overlaying": "y",
            "side": "right",
            "range": [0, 105],
            "tickvals": [0, 25, 50, 75, 100],
            "showgrid": False,
        },
        legend={"orientation": "h", "y": -0.25},
        height=480,
    )
    return fig


def kernel_explorer(kernels, table=None):
    """ipywidgets explorer (JupyterLab): dropdowns for config and layer -> the cell's kernel
    table (:func:`kernels_of`) and figure (:func:`plot_kernels`)."""
    import ipywidgets as W
    from IPython.display import display

    configs = sorted(kernels.config.unique(), key=config_key)
    cfg = W.Dropdown(options=configs, value=configs[-1], description="config")
    lay = W.Dropdown(options=layer_order(kernels.layer.dropna()), description="layer")
    if table is not None:
        lay.value = slowest_layer(table, cfg.value)
    out = W.Output()

    def update(*_):
        with out:
            out.clear_output(wait=True)
            try:
                kt = kernels_of(kernels, cfg.value, lay.value)
            except ValueError as e:
                print(e)
                return
            display(kt.round(2))
            display(plot_kernels(kt, title=f"{cfg.value} · {lay.value}"))

    cfg.observe(update, names="value")
    lay.observe(update, names="value")
    update()
    return W.VBox([W.HBox([cfg, lay]), out])


def plot_estimate_vs_measured(est, *, tolerance=10.0, title=None):
    """Scatter: ncu's achieved occupancy (x) against Kineto's estimate (y) per layer, one
    colour per width, marker area ~ the layer's time share; y = x and a +-``tolerance`` band."""
    import plotly.express as px

    d = est.assign(
        width=est.width.map(lambda w: f"w{w:g}"),
        time_pct=100 * est.time_share,
    )
    fig = px.scatter(
        d,
        x="ncu_achieved_occupancy_tw_pct",
        y="est_occupancy_tw_pct",
        color="width",
        size="time_pct",
        size_max=28,
        hover_data={
            "layer": True,
            "module_type": True,
            "ncu_theoretical_occupancy_tw_pct": ":.1f",
            "est_minus_achieved": ":.1f",
            "time_pct": ":.1f",
        },
        template=TEMPLATE,
        title=title or "Kineto's estimated occupancy vs Nsight Compute's measurement, per layer",
    )
    for off, dash in ((0, "dot"), (tolerance, "dash"), (-tolerance, "dash")):
        fig.add_shape(
            type="line",
            x0=0,
            y0=off,
            x1=100,
            y1=100 + off,
            line={"dash": dash, "color": "grey", "width": 1},
        )
    fig.update_layout(
        xaxis={"title": "ncu achieved occupancy (%, time-weighted)", "range": [0, 105]},
        yaxis={"title": "Kineto est. achieved occupancy (%, time-weighted)", "range": [0, 105]},
        height=560,
    )
    return fig


def findings(
    width_table,
    batch_table,
    est,
    precision_table,
    width_limiters=None,
    batch_limiters=None,
    *,
    threshold=50.0,
    high=85.0,
    tolerance=10.0,
):
    """The notebook's findings as Markdown, every number computed here from the tables
    (``width_limiters`` / ``batch_limiters``: :func:`limiter_shares` of the width / batch
    kernels, optional)."""
    import numpy as np

    ws = config_summary(width_table, by="width", threshold=threshold, high=high)
    bs = config_summary(batch_table, by="batch", threshold=threshold, high=high)
    widest = width_table[width_table.width == width_table.width.max()]
    top3 = widest.nlargest(3, "time_us")
    below = ", ".join(
        f"w{w:g}: {n}/{L}"
        for w, n, L in zip(ws.width, ws[f"layers_below_{threshold:g}"], ws.layers, strict=True)
    )
    r_ach = np.corrcoef(ws.width, ws.achieved_occupancy_tw_pct)[0, 1]
    r_theo = np.corrcoef(ws.width, ws.theoretical_occupancy_tw_pct)[0, 1]
    first, last = ws.iloc[0], ws.iloc[-1]
    le125 = ws[ws.width <= 1.25]
    w15 = ws[np.isclose(ws.width, 1.5)]
    above17 = ws[ws.width > 1.7]
    claim_a = bool((le125.achieved_occupancy_tw_pct > high).all())
    claim_b = bool(((w15.achieved_occupancy_tw_pct - 60).abs() <= 5).all()) if len(w15) else None
    claim_c = (
        bool((above17[f"layers_below_{threshold:g}"] > above17.layers / 2).all())
        if len(above17)
        else None
    )

    def yes(b):
        return "holds" if b else ("not testable here" if b is None else "does not hold")

    mis = est[(est.est_minus_achieved.abs() > tolerance)]
    over = mis[mis.est_minus_achieved > 0]
    under = mis[mis.est_minus_achieved < 0]
    mae = est.groupby("width").apply(
        lambda g: (g.est_minus_achieved.abs() * g.time_share).sum() / g.time_share.sum()
    )
    p = config_summary(precision_table, by="variant", threshold=threshold)
    p_best = p.loc[p.achieved_occupancy_tw_pct.idxmax()]
    p_worst = p.loc[p.achieved_occupancy_tw_pct.idxmin()]
    p_fast = p.loc[p.forward_kernel_ms.idxmin()]

    def lst(df):
        return ", ".join(
            f"{r.layer} {r.module_type} (w{r.width:g}: est {r.est_occupancy_tw_pct:.0f} % vs "
            f"measured {r.ncu_achieved_occupancy_tw_pct:.0f} %)"
            for r in df.sort_values("time_share", ascending=False).head(4).itertuples()
        )

    lines = [
        "**Findings (H200, Nsight Compute, fp16 NHWC, computed from the shipped tables).**",
        "",
        f"- **Where the time is.** At width {widest.width.iloc[0]:g} the three slowest layers are "
        + ", ".join(
            f"{r.layer_label} ({r.time_share:.1%} of the forward, achieved "
            f"{r.achieved_occupancy_tw_pct:.0f} % / theoretical "
            f"{r.theoretical_occupancy_tw_pct:.0f} %)"
            for r in top3.itertuples()
        )
        + ".",
        f"- **Occupancy over the whole forward** (time-weighted): achieved "
        f"{ws.achieved_occupancy_tw_pct.min():.0f}-{ws.achieved_occupancy_tw_pct.max():.0f} % "
        f"and theoretical {ws.theoretical_occupancy_tw_pct.min():.0f}-"
        f"{ws.theoretical_occupancy_tw_pct.max():.0f} % across widths "
        f"{first.width:g}-{last.width:g}. From w{first.width:g} to w{last.width:g}, achieved goes "
        f"{first.achieved_occupancy_tw_pct:.0f} -> {last.achieved_occupancy_tw_pct:.0f} % and "
        f"theoretical {first.theoretical_occupancy_tw_pct:.0f} -> "
        f"{last.theoretical_occupancy_tw_pct:.0f} % (correlation with width: achieved "
        f"{r_ach:+.2f}, theoretical {r_theo:+.2f}).",
        f"- **Layers below {threshold:g} % achieved occupancy**, per width: {below}.",
        f'- **The claim** "width <= 1.25 keeps occupancy > 85 %; 1.5 gives ~60 %; above 1.7 '
        f'most layers fall below {threshold:g} %": part 1 {yes(claim_a)} (achieved at w <= 1.25: '
        f"{le125.achieved_occupancy_tw_pct.min():.0f}-{le125.achieved_occupancy_tw_pct.max():.0f}"
        f" %, and even theoretical is only {le125.theoretical_occupancy_tw_pct.min():.0f}-"
        f"{le125.theoretical_occupancy_tw_pct.max():.0f} %; no width has more than "
        f"{ws[f'layers_at_least_{high:g}'].max()} of {ws.layers.max()} layers at {high:g} % or "
        f"more); part 2 {yes(claim_b)}"
        + (f" (w1.5: {w15.achieved_occupancy_tw_pct.iloc[0]:.0f} %)" if len(w15) else "")
        + f"; part 3 {yes(claim_c)}"
        + (
            " ("
            + ", ".join(
                f"w{r.width:g}: {r[f'layers_below_{threshold:g}']} of {r.layers}"
                for _, r in above17.iterrows()
            )
            + ")"
            if len(above17)
            else ""
        )
        + ".",
        f"- **Batch** (width 1.0): achieved {bs.achieved_occupancy_tw_pct.iloc[0]:.0f} % at "
        f"batch {bs.batch.iloc[0]} -> {bs.achieved_occupancy_tw_pct.iloc[-1]:.0f} % at batch "
        f"{bs.batch.iloc[-1]}; layers below {threshold:g} %: "
        + ", ".join(
            f"b{b}: {n}" for b, n in zip(bs.batch, bs[f"layers_below_{threshold:g}"], strict=True)
        )
        + ".",
        f"- **Kineto's estimate** is off by more than {tolerance:g} points on {len(mis)} of "
        f"{len(est)} layer rows (time-weighted mean error "
        + ", ".join(f"w{w:g}: {v:.1f} points" for w, v in mae.items())
        + f"). It overestimates on {len(over)}"
        + (f", e.g. {lst(over)}" if len(over) else "")
        + f"; it underestimates on {len(under)}"
        + (f", e.g. {lst(under)}" if len(under) else "")
        + ".",
        f"- **Precision and layout** (w1.0 b8): achieved occupancy is highest for "
        f"{p_best.variant} ({p_best.achieved_occupancy_tw_pct:.0f} %, "
        f"{p_best.forward_kernel_ms:.2f} ms of kernels) and lowest for {p_worst.variant} "
        f"({p_worst.achieved_occupancy_tw_pct:.0f} %, {p_worst.forward_kernel_ms:.2f} ms); the "
        f"fastest is {p_fast.variant} ({p_fast.forward_kernel_ms:.2f} ms at "
        f"{p_fast.achieved_occupancy_tw_pct:.0f} % achieved), so higher occupancy is not by "
        "itself a faster forward.",
    ]
    limits = []
    for tab, key, lab in ((width_limiters, "width", "w"), (batch_limiters, "batch", "b")):
        if tab is None:
            continue
        t = tab.sort_values(key)
        a, b = t.iloc[0], t.iloc[-1]
        parts = [
            f"{c} {a[c]:.0%} -> {b[c]:.0%}" for c in LIMITERS if c in t and max(a[c], b[c]) >= 0.005
        ]
        limits.append(f"{lab}{a[key]:g} -> {lab}{b[key]:g}: " + ", ".join(parts))
    if limits:
        lines.insert(
            4,
            "- **What limits them** (share of forward kernel time per kernel limiter; `grid` = "
            "under one wave): " + "; ".join(limits) + ".",
        )
    return "\n".join(lines)

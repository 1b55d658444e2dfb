"""Figures, sections and the kernel explorer of the occupancy heatmaps (notebook 04)."""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import tables
from yolo_sm.report.colors import (
    OCCUPANCY_COLORS,
    OCCUPANCY_SCALE,
    OTHER_COLOR,
    SHARE_SCALE,
    TEMPLATE,
    WIDTH_SCALE,
    color_map,
    sequential_map,
)
from yolo_sm.report.sections import needs, section
from yolo_sm.report.style import finish
from yolo_sm.report.widgets import explorer
from yolo_sm.topics.heatmaps.analyse import (
    LIMITERS,
    PRECISION_ORDER,
    STALL,
    STALLS,
    config_key,
    kernels_of,
    layer_order,
    slowest_layer,
    spill_kernels,
    stalls_long,
    top_kernels,
)


def _variant_key(v: str) -> tuple:
    prec, _, layout = str(v).partition(" ")
    return (PRECISION_ORDER.index(prec) if prec in PRECISION_ORDER else 99, prec, layout)


def _x_label(x, v):
    return {"width": f"w{v:g}", "batch": f"b{v}"}.get(x, str(v)) if x in ("width", "batch") else v


def _grid(table, value, x):
    """(layer labels in model order, x labels, z matrix rows=layers) for one value column."""
    labels = table.drop_duplicates("layer").sort_values("layer_idx").layer_label.tolist()
    xs = sorted(table[x].drop_duplicates(), key=_variant_key if x == "variant" else None)
    z = table.pivot_table(index="layer_label", columns=x, values=value, aggfunc="first")
    z = z.reindex(index=labels, columns=xs)
    return labels, [_x_label(x, v) for v in xs], z


AXIS_TITLES = {
    "width": "width multiplier",
    "batch": "batch size",
    "variant": "precision and layout",
}
_VALUE_TITLES = {
    "achieved_occupancy_tw_pct": "achieved occupancy (%, time-weighted)",
    "theoretical_occupancy_tw_pct": "theoretical occupancy (%, time-weighted)",
    "time_share": "share of forward kernel time",
}


# fmt: off
def plot_layer_heatmap(table, values=("achieved_occupancy_tw_pct",), *, x="width", title=None):
    """Heatmaps of layer x ``x`` (width, batch or variant), one panel per column of ``values``
    on one colour scale; hover adds the layer's kernels, time and main limiter."""
    import numpy as np
    from plotly.subplots import make_subplots

    values = [values] if isinstance(values, str) else list(values)
    share = all(v == "time_share" for v in values)
    fig = make_subplots(rows=1, cols=len(values), shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[_VALUE_TITLES.get(v, v) for v in values])
    zmax = 100.0 if not share else float(np.nanmax(table[values].to_numpy()))
    custom = np.dstack([_grid(table, c, x)[2].to_numpy()
                        for c in ("kernels", "time_us", "main_limiter")])
    for i, v in enumerate(values, start=1):
        labels, xs, z = _grid(table, v, x)
        fmt = "%{z:.1%}" if v == "time_share" else "%{z:.0f}"
        fig.add_heatmap(
            z=z.to_numpy(), x=xs, y=labels, customdata=custom, coloraxis="coloraxis",
            texttemplate=fmt, textfont={"size": 10}, row=1, col=i,
            hovertemplate=f"%{{y}} · %{{x}}<br>{v}: {fmt}<br>kernels: %{{customdata[0]}}"
            "<br>time: %{customdata[1]:.1f} us<br>main limiter: %{customdata[2]}<extra></extra>",
        )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.layout.yaxis.title.text = "layer"
    fig.update_xaxes(type="category", title_text=AXIS_TITLES.get(x, x))
    fig.update_layout(template=TEMPLATE, height=max(450, 24 * table.layer.nunique() + 150),
                      title=title, coloraxis={
        "colorscale": SHARE_SCALE if share else OCCUPANCY_SCALE, "cmin": 0, "cmax": zmax,
        "colorbar": {"tickformat": ".0%" if share else "", "title": "" if share else "%"}})
    return finish(fig)
# fmt: on


def plot_limiter_heatmap(table, *, x="width", column="main_limiter", title=None):
    """Categorical heatmap: the limiter of most of each layer's kernel time, with its share."""
    import numpy as np
    import plotly.graph_objects as go

    share = f"{column}_share" if f"{column}_share" in table else "time_share"
    labels, xs, cats = _grid(table, column, x)
    present = [c for c in LIMITERS if (cats == c).to_numpy().any()] or list(LIMITERS)
    colors, n = color_map(present, default=OTHER_COLOR), len(present)
    z = cats.apply(lambda s: s.map({c: i for i, c in enumerate(present)})).to_numpy(dtype=float)
    scale = [[(i + j) / n, colors[c]] for i, c in enumerate(present) for j in (0, 1)]  # flat bands
    extra = ("theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct", "time_share", share)
    custom = np.dstack([_grid(table, c, x)[2].to_numpy() for c in extra])
    names = cats.fillna("").to_numpy()
    text = names.astype(str)
    if share != "time_share":
        shares = custom[:, :, 3].astype(float)
        text = np.array([[f"{t} {v:.0%}" if t and v == v else t
                          for t, v in zip(tr, vr, strict=True)]
                         for tr, vr in zip(names, shares, strict=True)])  # fmt: skip
    fig = go.Figure(go.Heatmap(
        z=z, x=xs, y=labels, text=text, texttemplate="%{text}", textfont={"size": 10},
        customdata=custom, colorscale=scale, zmin=-0.5, zmax=n - 0.5,
        colorbar={"tickvals": list(range(n)), "ticktext": present, "title": "limiter"},
        hovertemplate="%{y} · %{x}<br>main limiter: %{text}<br>theoretical %{customdata[0]:.0f} %"
        "<br>achieved %{customdata[1]:.0f} %<br>layer's share of the forward %{customdata[2]:.1%}"
        "<br>share of the layer's time under this limiter %{customdata[3]:.0%}<extra></extra>",
    ))  # fmt: skip
    fig.update_yaxes(autorange="reversed", type="category", title_text="layer")
    fig.update_xaxes(type="category", title_text=AXIS_TITLES.get(x, x))
    fig.update_layout(
        template=TEMPLATE, height=max(450, 24 * table.layer.nunique() + 150),
        title=title or "Main limiter per layer (the limiter of most of the layer's kernel time)",
    )  # fmt: skip
    return finish(fig)


def plot_limiter_shares(shares, *, x="width", title=None):
    """Stacked bars: share of the forward's kernel time under each limiter, per ``x``."""
    import plotly.express as px

    cols = [c for c in LIMITERS if c in shares]
    long = shares.assign(**{x: shares[x].map(lambda v: _x_label(x, v))}).melt(
        id_vars=[x], value_vars=cols, var_name="limiter", value_name="time_share"
    )
    fig = px.bar(long, x=x, y="time_share", color="limiter", template=TEMPLATE,
                 color_discrete_map=color_map(cols, default=OTHER_COLOR),
                 category_orders={"limiter": cols},
                 title=title or "Share of forward kernel time per limiter")  # fmt: skip
    fig.update_layout(yaxis_tickformat=".0%", yaxis_title="share of kernel time")
    return finish(fig.update_xaxes(type="category"))


def plot_kernels(ktable, *, title=None):
    """One bar per kernel (launch order, duration in us) by class; occupancy markers at right."""
    import plotly.graph_objects as go

    k = ktable.reset_index(drop=True)
    xs = [str(i) for i in range(len(k))]  # launch order; the name is in the hover
    cols = ["grid_size", "block_size", "registers_per_thread", "limiter", "waves_per_sm", "kernel"]
    fig = go.Figure()
    for cls, g in k.groupby("kernel_class", sort=False):
        fig.add_bar(
            x=[xs[i] for i in g.index], y=g.duration_us, name=cls,
            marker_color=color_map([cls], default=OTHER_COLOR)[cls], customdata=g[cols].to_numpy(),
            hovertemplate="#%{x} %{customdata[5]}<br>%{y:.1f} us<br>grid %{customdata[0]} x "
            "block %{customdata[1]}<br>%{customdata[2]} registers/thread<br>limiter "
            "%{customdata[3]}, %{customdata[4]} waves<extra></extra>",
        )  # fmt: skip
    for kind, sym in (("theoretical", "circle-open"), ("achieved", "circle")):
        name = f"{kind} occupancy"
        fig.add_scatter(
            x=xs, y=k[f"{kind}_occupancy_pct"], mode="markers", name=name, yaxis="y2",
            marker={"symbol": sym, "size": 10, "color": OCCUPANCY_COLORS[kind]},
            customdata=k.kernel,
            hovertemplate="#%{x} %{customdata}<br>" + name + " %{y:.1f} %<extra></extra>",
        )  # fmt: skip
    fig.update_layout(
        template=TEMPLATE, title=title, barmode="overlay", height=480,
        xaxis={"categoryorder": "array", "categoryarray": xs,
               "title": "kernel, in launch order (hover for its name)"},
        yaxis={"title": "duration (us)"},
        yaxis2={"title": "occupancy (%)", "overlaying": "y", "side": "right", "range": [0, 105],
                "tickvals": [0, 25, 50, 75, 100], "showgrid": False},
        legend={"orientation": "h", "y": -0.25},
    )  # fmt: skip
    return finish(fig)


def kernel_explorer(kernels, table=None):
    """ipywidgets explorer: config and layer dropdowns -> that cell's kernel table and figure."""
    import ipywidgets as W

    configs = sorted(kernels.config.unique(), key=config_key)
    cfg = W.Dropdown(options=configs, value=configs[-1], description="config")
    lay = W.Dropdown(options=layer_order(kernels.layer.dropna()), description="layer")
    if table is not None:
        lay.value = slowest_layer(table, cfg.value)

    def draw(config, layer):
        kt = kernels_of(kernels, config, layer)
        return [tables.show(kt), plot_kernels(kt, title=f"{config} · {layer}")]

    return explorer([cfg, lay], draw)


def plot_estimate_vs_measured(est, *, tolerance=10.0, title=None):
    """Per layer: ncu's achieved occupancy (x) against Kineto's estimate (y), +-``tolerance``."""
    import plotly.express as px

    d = est.assign(width=est.width.map(lambda w: f"w{w:g}"), time_pct=100 * est.time_share)
    widths = {f"w{w:g}": c for w, c in sequential_map(est.width, WIDTH_SCALE).items()}
    hover = {"layer": True, "module_type": True, "ncu_theoretical_occupancy_tw_pct": ":.1f",
             "est_minus_achieved": ":.1f", "time_pct": ":.1f"}  # fmt: skip
    fig = px.scatter(
        d, x="ncu_achieved_occupancy_tw_pct", y="est_occupancy_tw_pct", color="width",
        color_discrete_map=widths, size="time_pct", size_max=28, hover_data=hover,
        template=TEMPLATE,
        title=title or "Kineto's estimated occupancy vs Nsight Compute's measurement, per layer",
    )  # fmt: skip
    for off, dash in ((0, "dot"), (tolerance, "dash"), (-tolerance, "dash")):
        fig.add_shape(type="line", x0=0, y0=off, x1=100, y1=100 + off,
                      line={"dash": dash, "color": "grey", "width": 1})  # fmt: skip
    fig.update_layout(
        xaxis={"title": "ncu achieved occupancy (%, time-weighted)", "range": [0, 105]},
        yaxis={"title": "Kineto est. achieved occupancy (%, time-weighted)", "range": [0, 105]},
        height=560,
    )
    return finish(fig)


def plot_stalls(long, title: str | None = None):
    """Per layer's top kernel: stall cycles per issued instruction by reason (stacked bars)."""
    import plotly.express as px

    order = list(dict.fromkeys(long.label))
    fig = px.bar(
        long,
        y="label",
        x="cycles",
        color="reason",
        orientation="h",
        template=TEMPLATE,
        hover_data=["kernel", "share"],
        category_orders={"label": order},
        title=title or "What the top kernel of each layer waits on",
    )
    fig.update_xaxes(title_text="stall cycles per issued instruction (warp average)")
    fig.update_yaxes(title_text="layer", autorange="reversed")
    fig.update_layout(height=max(420, 18 * len(order) + 160), legend_title_text="stall reason")
    return finish(fig)


@needs(STALLS)
def stall_table(root: DataRoot):
    """Each layer's top kernel: main stall reason, efficiency, cache hit rates, spill sectors."""
    t = top_kernels(root.load(STALLS))
    keep = [c for c in t.columns if not STALL.fullmatch(c) and c != "config"]
    return tables.show(t[keep])


@needs(STALLS)
def stalls_figure(root: DataRoot):
    title = f"What the top kernel of each layer waits on ({root.device_name()})"
    return plot_stalls(stalls_long(top_kernels(root.load(STALLS))), title=title)


spills = section(STALLS, spill_kernels, tables.show)

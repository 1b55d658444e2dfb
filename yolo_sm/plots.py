"""Plot functions: ``plot_x(df, ...) -> plotly Figure``, never shown inside.

Colours for backends, precisions and layouts come from one mapping, so every notebook matches.
Call :func:`setup_notebook` once per notebook: figures then embed plotly.js in the page itself,
so rendered HTML works offline (no CDN).
"""

from __future__ import annotations

COLORS = {
    # backends
    "eager": "#636EFA",
    "cudagraph": "#EF553B",
    "compile": "#00CC96",
    "onnxruntime": "#AB63FA",
    "tensorrt": "#FFA15A",
    # precisions
    "fp32": "#1F77B4",
    "tf32": "#17BECF",
    "fp16": "#D62728",
    "bf16": "#FF7F0E",
    "int8": "#2CA02C",
    # layouts
    "nchw": "#7F7F7F",
    "nhwc": "#BCBD22",
}
TEMPLATE = "plotly_white"


def setup_notebook() -> None:
    """Plotly renders with plotly.js inlined once per notebook (offline HTML), white template."""
    import plotly.io as pio

    pio.renderers.default = "notebook"
    pio.templates.default = TEMPLATE


def _color_map(values) -> dict:
    return {v: COLORS[v] for v in values if v in COLORS}


def plot_width_flops(table, *, x="width", y="gflops_per_img"):
    """GFLOPs per image against width, with the quadratic width^2 law for comparison."""
    import plotly.graph_objects as go

    base = table.loc[(table[x] - 1.0).abs().idxmin()]
    fig = go.Figure()
    fig.add_scatter(
        x=table[x],
        y=table[y],
        mode="lines+markers",
        name="counted (channel table)",
        hovertemplate="width %{x}<br>%{y:.1f} GFLOPs/img<extra></extra>",
    )
    fig.add_scatter(
        x=table[x],
        y=base[y] * (table[x] / base[x]) ** 2,
        mode="lines",
        line={"dash": "dot"},
        name="width² law from width 1.0",
    )
    fig.update_layout(
        title="FLOPs per 640x640 image vs width",
        xaxis_title="width multiplier",
        yaxis_title="GFLOPs per image (2 per multiply-add)",
        template=TEMPLATE,
    )
    return fig


def plot_throughput(
    df,
    *,
    x="width",
    y="img_per_s",
    color="backend",
    facet_col=None,
    facet_row=None,
    log_y=True,
    title=None,
):
    """Throughput (or any metric) lines from a sweep table; hover shows the point's config."""
    import plotly.express as px

    ok = df[df["status"] == "ok"].sort_values(x)
    hover = [
        c
        for c in ("precision", "layout", "backend", "batch", "median_ms", "iqr_ms", "tflops")
        if c in ok
    ]
    fig = px.line(
        ok,
        x=x,
        y=y,
        color=color,
        facet_col=facet_col,
        facet_row=facet_row,
        markers=True,
        log_y=log_y,
        hover_data=hover,
        color_discrete_map=_color_map(ok[color].unique()),
        template=TEMPLATE,
        title=title or f"{y} vs {x}",
    )
    return fig


def plot_speedup(
    df,
    *,
    over="eager",
    index=("width", "precision", "layout", "batch"),
    value="median_ms",
    color="backend",
    x="batch",
    facet_col="width",
    facet_row="layout",
    title=None,
):
    """Latency ratio of each backend to ``over`` measured in the same run (below 1: faster).

    Every ``index`` column must be on an axis or facet, or filtered to one value beforehand,
    else bars of different configs would stack."""
    import plotly.express as px

    ok = df[df["status"] == "ok"]
    free = [c for c in index if c not in (x, facet_col, facet_row) and ok[c].nunique() > 1]
    if free:
        raise ValueError(f"plot_speedup: filter {', '.join(free)} to one value or facet on it")
    wide = ok.pivot_table(index=list(index), columns=color, values=value).reset_index()
    long = wide.melt(
        id_vars=list(index),
        value_vars=[c for c in wide.columns if c not in index],
        var_name=color,
        value_name=value,
    )
    long = long.merge(wide[list(index) + [over]], on=list(index))
    long["ratio"] = long[value] / long[over]
    long = long[long[color] != over]
    fig = px.bar(
        long,
        x=long[x].astype(str),
        y="ratio",
        color=color,
        barmode="group",
        facet_col=facet_col,
        facet_row=facet_row,
        hover_data=list(index) + [value],
        color_discrete_map=_color_map(long[color].unique()),
        template=TEMPLATE,
        title=title or f"{value} relative to {over} (same run)",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_xaxes(title_text=x)
    return fig

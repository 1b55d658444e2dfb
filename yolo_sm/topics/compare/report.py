"""Figures of two roots side by side (notebook 12), from the tables of
:mod:`yolo_sm.topics.compare.analyse`; each returns a plotly Figure, or None when the table holds no
point both roots measured (the notebook then prints one line saying so)."""

from __future__ import annotations

from yolo_sm.analyse.hostbound import TOLERANCE
from yolo_sm.report.colors import BACKEND_COLORS, TEMPLATE
from yolo_sm.topics.compare import analyse as compare
from yolo_sm.topics.compare.analyse import BOTH


def _kind(d):
    return d["launch_bound"].astype(bool).map({True: "host-bound", False: "GPU-bound"})


def _both(m):
    return m[m["present"] == BOTH]


def plot_all_points(m, a: str = "a", b: str = "b", title: str | None = None):
    """Every sweep point of both roots: img/s against batch (log axes), one marker per point
    and machine, colour by machine, symbol by ``present`` (measured on both, or on that
    machine only), so the points one machine lacks stay in view."""
    import pandas as pd
    import plotly.express as px

    keep = ["family", "width", "precision", "layout", "backend", "batch", "imgsz", "present"]
    sides = []
    for side, name in (("a", a), ("b", b)):
        d = m.dropna(subset=[f"img_per_s_{side}"])[keep + [f"img_per_s_{side}"]]
        sides.append(d.rename(columns={f"img_per_s_{side}": "img_per_s"}).assign(machine=name))
    d = pd.concat(sides, ignore_index=True)
    if a == b:
        d["machine"] = (
            d["machine"] + pd.Series(["", " (b)"]).repeat([len(sides[0]), len(sides[1])]).values
        )
    fig = px.scatter(
        d,
        x="batch",
        y="img_per_s",
        color="machine",
        symbol="present",
        hover_data=["family", "width", "precision", "layout", "backend", "imgsz"],
        log_x=True,
        log_y=True,
        template=TEMPLATE,
        title=title or f"Every sweep point of {a} and {b}",
    )
    fig.update_layout(xaxis_title="batch (images per forward)", yaxis_title="images per second")
    return fig


def plot_throughput(m, a: str = "a", b: str = "b", title: str | None = None):
    """img/s on machine a (x) against machine b (y), one marker per point both measured,
    log axes, colour by backend, symbol host-bound / GPU-bound; the dashed line is y = x."""
    import plotly.express as px

    d = _both(m)
    if d.empty:
        return None
    d = d.assign(kind=_kind(d))
    fig = px.scatter(
        d,
        x="img_per_s_a",
        y="img_per_s_b",
        color="backend",
        symbol="kind",
        hover_data=["family", "width", "precision", "layout", "batch", "imgsz", "ratio"],
        color_discrete_map=BACKEND_COLORS,
        log_x=True,
        log_y=True,
        template=TEMPLATE,
        title=title or f"Throughput per point: {b} against {a}",
    )
    lo = float(min(d.img_per_s_a.min(), d.img_per_s_b.min()))
    hi = float(max(d.img_per_s_a.max(), d.img_per_s_b.max()))
    fig.add_shape(type="line", x0=lo, y0=lo, x1=hi, y1=hi, line={"dash": "dash", "color": "grey"})
    fig.update_layout(
        xaxis_title=f"images per second on {a}", yaxis_title=f"images per second on {b}"
    )
    return fig


def plot_ratio(m, a: str = "a", b: str = "b", title: str | None = None):
    """b / a img/s against batch per point both measured, colour by backend, symbol
    host-bound / GPU-bound, the +- 10 % band shaded: the run-to-run spread of two
    collections on the same GPU, or the speed-up of one machine over the other."""
    import plotly.express as px

    d = _both(m)
    if d.empty:
        return None
    d = d.assign(kind=_kind(d))
    fig = px.scatter(
        d,
        x="batch",
        y="ratio",
        color="backend",
        symbol="kind",
        hover_data=["family", "width", "precision", "layout", "imgsz", "img_per_s_a"],
        color_discrete_map=BACKEND_COLORS,
        log_x=True,
        template=TEMPLATE,
        title=title or f"img/s on {b} over img/s on {a}, per point",
    )
    fig.add_hrect(y0=1 - TOLERANCE, y1=1 + TOLERANCE, fillcolor="grey", opacity=0.15, line_width=0)
    fig.update_layout(xaxis_title="batch (images per forward)", yaxis_title=f"{b} / {a} img/s")
    return fig


def plot_ceiling_share(m, a: str = "a", b: str = "b", title: str | None = None):
    """Delivered TFLOP/s as % of each machine's own dense matmul ceiling (same precision),
    a (x) against b (y), per point both measured where both machines have a ceiling."""
    import plotly.express as px

    d = _both(m).dropna(subset=["pct_of_ceiling_a", "pct_of_ceiling_b"])
    if d.empty:
        return None
    d = d.assign(kind=_kind(d))
    fig = px.scatter(
        d,
        x="pct_of_ceiling_a",
        y="pct_of_ceiling_b",
        color="backend",
        symbol="kind",
        hover_data=["family", "width", "precision", "batch", "tflops_a", "tflops_b"],
        color_discrete_map=BACKEND_COLORS,
        template=TEMPLATE,
        title=title or "Delivered TFLOP/s as % of each machine's own matmul ceiling",
    )
    hi = float(max(d.pct_of_ceiling_a.max(), d.pct_of_ceiling_b.max()))
    fig.add_shape(type="line", x0=0, y0=0, x1=hi, y1=hi, line={"dash": "dash", "color": "grey"})
    fig.update_layout(xaxis_title=f"% of ceiling on {a}", yaxis_title=f"% of ceiling on {b}")
    return fig


def plot_layer_occupancy(layers, config: str, a: str = "a", b: str = "b", title: str | None = None):
    """Time-weighted achieved occupancy per layer of one config, a and b as grouped bars in
    model order (a layer one machine lacks shows one bar)."""
    import plotly.graph_objects as go

    d = layers[layers["config"] == config].sort_values("layer_idx")
    if d.empty:
        return None
    fig = go.Figure()
    for side, name in (("a", a), ("b", b)):
        fig.add_bar(
            x=d["layer"],
            y=d[f"achieved_occupancy_tw_pct_{side}"],
            name=name,
            hovertemplate="%{x}: %{y:.1f} %<extra>" + name + "</extra>",
        )
    fig.update_layout(
        template=TEMPLATE,
        barmode="group",
        title=title or f"Achieved occupancy per layer, {config}",
        xaxis_title="layer (model order)",
        yaxis_title="achieved occupancy, time-weighted (%)",
    )
    return fig


# ---- notebook 12 sections: what a cell shows, in order (tables, figures, or one sentence) -----

POINT_COLUMNS = ("family", "width", "precision", "layout", "backend", "batch", "imgsz")


def shared_points(m, a: str = "a", b: str = "b") -> list:
    """The points both measured (keys, img/s on each, ratio, delivered TFLOP/s and % of each
    machine's own ceiling, host-bound flag), or one sentence when there are none."""
    d = _both(m)
    if d.empty:
        return [f"No sweep point was measured on both {a} and {b}."]
    cols = [*POINT_COLUMNS, "img_per_s_a", "img_per_s_b", "ratio", "tflops_a", "tflops_b"]
    cols += ["pct_of_ceiling_a", "pct_of_ceiling_b", "launch_bound"]
    return [d[cols].round(3)]


def one_root_only(m, a: str = "a", b: str = "b") -> list:
    """The points only one root holds, with the dataset they come from and their img/s."""
    d = m[m["present"] != BOTH]
    if d.empty:
        return [f"Every point of {a} and of {b} was measured on both."]
    cols = ["present", "dataset_a", "dataset_b", *POINT_COLUMNS, "img_per_s_a", "img_per_s_b"]
    return [d[cols].round(1)]


def throughput(m, a: str = "a", b: str = "b") -> list:
    """Every point of both roots, then the throughput and ceiling-share figures of the points
    both measured (none without such points: :func:`shared_points` says so once)."""
    shared = [f for f in (plot_throughput(m, a, b), plot_ceiling_share(m, a, b)) if f]
    return [plot_all_points(m, a, b), *shared]


def layer_occupancy(layers, a: str = "a", b: str = "b") -> list:
    """Layers per ``present``, then for the config with most shared layers its table and
    figure (a sentence when no layer was profiled on both)."""
    counts = layers.groupby("present").size().rename("layers").to_frame()
    shared = layers[layers["present"] == BOTH]
    if shared.empty:
        return [counts, f"No layer was profiled on both {a} and {b}."]
    config = shared["config"].value_counts().index[0]
    cols = ["config", "layer", "module_type", "time_us_a", "time_us_b"]
    cols += ["achieved_occupancy_tw_pct_a", "achieved_occupancy_tw_pct_b"]
    cols += ["achieved_minus_pct_points", "main_limiter_a", "main_limiter_b"]
    one = shared[shared["config"] == config]
    return [counts, one[cols].round(1), plot_layer_occupancy(layers, config, a, b)]


def spread(m, a: str = "a", b: str = "b") -> list:
    """The ratio summary per kind of point (:func:`yolo_sm.topics.compare.analyse.spread`) and its
    figure (none when no point was measured on both)."""
    return [] if _both(m).empty else [compare.spread(m).round(3), plot_ratio(m, a, b)]

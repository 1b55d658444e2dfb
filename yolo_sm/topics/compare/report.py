"""Notebook 12's figures and sections; a figure of shared points is None without any."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.hostbound import TOLERANCE
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import BACKEND_COLORS, TEMPLATE
from yolo_sm.report.rules import evaluate, topic_rules
from yolo_sm.topics.compare import analyse as compare
from yolo_sm.topics.compare.analyse import BOTH

# fmt: off


def _both(m):
    return m[m["present"] == BOTH]


def plot_all_points(m, a: str = "a", b: str = "b", title: str | None = None):
    """Every sweep point of both roots: img/s against batch (log axes), colour by machine."""
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
        d, x="batch", y="img_per_s", color="machine", symbol="present",
        hover_data=["family", "width", "precision", "layout", "backend", "imgsz"], log_x=True,
        log_y=True, template=TEMPLATE, title=title or f"Every sweep point of {a} and {b}",
    )
    fig.update_layout(xaxis_title="batch (images per forward)", yaxis_title="images per second")
    return fig


def _scatter(m, x, y, title, xlab, ylab, **kw):
    """Shared points, ``x`` against ``y`` by backend and host- / GPU-bound; None without any."""
    import plotly.express as px

    d = _both(m).dropna(subset=[x, y])
    if d.empty:
        return None
    d = d.assign(kind=d.launch_bound.astype(bool).map({True: "host-bound", False: "GPU-bound"}))
    fig = px.scatter(
        d, x=x, y=y, color="backend", symbol="kind",
        color_discrete_map=BACKEND_COLORS, template=TEMPLATE, title=title,
        hover_data=["family", "width", "precision", "layout", "batch", "imgsz"], **kw,
    )
    if x != "batch":  # the same on both: y = x
        lo, hi = (
            (0.0 if not kw.get("log_x") else float(d[[x, y]].min().min())),
            float(d[[x, y]].max().max()),
        )
        fig.add_shape(
            type="line", x0=lo, y0=lo, x1=hi, y1=hi, line={"dash": "dash", "color": "grey"}
        )
    else:  # the +- tolerance band
        fig.add_hrect(
            y0=1 - TOLERANCE, y1=1 + TOLERANCE, fillcolor="grey", opacity=0.15, line_width=0
        )
    return fig.update_layout(xaxis_title=xlab, yaxis_title=ylab)


def plot_throughput(m, a: str = "a", b: str = "b"):
    """img/s on a (x) against b (y) per point both measured, log axes; dashed: y = x."""
    return _scatter(
        m, "img_per_s_a", "img_per_s_b", f"Throughput per point: {b} against {a}",
        f"images per second on {a}", f"images per second on {b}", log_x=True, log_y=True,
    )


def plot_ratio(m, a: str = "a", b: str = "b"):
    """b / a img/s against batch per shared point, the +- tolerance band shaded."""
    return _scatter(
        m, "batch", "ratio", f"img/s on {b} over img/s on {a}, per point",
        "batch (images per forward)", f"{b} / {a} img/s", log_x=True,
    )


def plot_ceiling_share(m, a: str = "a", b: str = "b"):
    """Delivered TFLOP/s as % of each machine's own dense matmul ceiling, a (x) against b (y)."""
    return _scatter(
        m, "pct_of_ceiling_a", "pct_of_ceiling_b",
        "Delivered TFLOP/s as % of each machine's own matmul ceiling", f"% of ceiling on {a}",
        f"% of ceiling on {b}",
    )


def plot_layer_occupancy(layers, config: str, a: str = "a", b: str = "b", title: str | None = None):
    """Time-weighted achieved occupancy per layer of one config, a and b as grouped bars."""
    import plotly.graph_objects as go

    d = layers[layers["config"] == config].sort_values("layer_idx")
    if d.empty:
        return None
    fig = go.Figure()
    for side, name in (("a", a), ("b", b)):
        fig.add_bar(
            x=d["layer"], y=d[f"achieved_occupancy_tw_pct_{side}"], name=name,
            hovertemplate="%{x}: %{y:.1f} %<extra>" + name + "</extra>",
        )
    fig.update_layout(
        template=TEMPLATE, barmode="group",
        title=title or f"Achieved occupancy per layer, {config}", xaxis_title="layer (model order)",
        yaxis_title="achieved occupancy, time-weighted (%)",
    )
    return fig


POINT_COLUMNS = ("family", "width", "precision", "layout", "backend", "batch", "imgsz")


def shared_points(m, a: str = "a", b: str = "b") -> list:
    """The shared points' img/s, ratio, TFLOP/s and ceiling shares, or one sentence."""
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
    """Every point of both roots, then the shared points' throughput and ceiling figures."""
    shared = [f for f in (plot_throughput(m, a, b), plot_ceiling_share(m, a, b)) if f]
    return [plot_all_points(m, a, b), *shared]


def layer_occupancy(layers, a: str = "a", b: str = "b") -> list:
    """Layers per ``present``; the config with most shared layers as table and figure."""
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
    """The ratio summary per kind of point and its figure (none without shared points)."""
    return [] if _both(m).empty else [compare.spread(m).round(3), plot_ratio(m, a, b)]


def verdicts(a: DataRoot, b: DataRoot, points: pd.DataFrame | None = None) -> pd.DataFrame:
    """The verdict table of the topic's rules for ``a`` against ``b``, naming both roots' sweeps."""
    f = compare.facts(a, b, points)
    rules = topic_rules("compare")
    out = evaluate(rules, f, "")
    ds = {k: ", ".join(d) for k, d in zip(f.key, f.datasets, strict=True)}
    out["datasets"] = [ds.get(r.fact, "") for r in rules]
    return out


def side_by_side(va: pd.DataFrame, vb: pd.DataFrame, a: str = "a", b: str = "b") -> pd.DataFrame:
    """Two verdict tables joined on the rule, measured and verdict per side and ``agree``; a
    rule tested on neither is left out (``attrs["dropped"]`` counts them)."""
    cols = ["id", "statement", "unit", "measured", "verdict"]
    m = va[cols].merge(
        vb[["id", "measured", "verdict"]], on="id", how="outer", suffixes=("_a", "_b")
    )
    m["statement"] = m["statement"].fillna(m["id"])
    for side in ("a", "b"):
        m[f"verdict_{side}"] = m[f"verdict_{side}"].fillna("absent")
    untested = ("not tested", "absent")
    idle = m["verdict_a"].isin(untested) & m["verdict_b"].isin(untested)
    out = m[~idle].assign(agree=m["verdict_a"] == m["verdict_b"])
    sides = (("a", a), ("b", b))
    names = {f"{c}_{s}": f"{c} {s} ({n})" for c in ("measured", "verdict") for s, n in sides}
    order = ["statement", "measured_a", "verdict_a", "measured_b", "verdict_b", "unit", "agree"]
    out = out.set_index("id")[order].rename(columns=names)
    out.attrs["dropped"] = int(idle.sum())
    return out

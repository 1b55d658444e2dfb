"""Figures and tables of the shapes notebooks (14: wide or deep at equal FLOPs; 15: one engine
per resolution or one dynamic engine), from :mod:`yolo_sm.topics.shapes.analyse`."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.sections import needs
from yolo_sm.report.style import finish
from yolo_sm.report.tables import show
from yolo_sm.topics.shapes import analyse as shapes

#: the engine sizes of notebook 15 and the frames its selector figure serves
ENGINES = ("640x640", "1280x736", "1920x1088")
FRAMES = ("640x480", "640x640", "1280x720", "1280x1024", "1920x1080", "2560x1440", "3840x2160")


# --- 14 · wide or deep ----------------------------------------------------------------------


def plot_presets(df: pd.DataFrame, batch: int = 64):
    """img/s against GFLOPs per image of the YOLOv8 presets (CUDA graph fp16 at ``batch``),
    one marker per preset coloured by its depth multiplier: where width and depth change
    together."""
    import plotly.express as px

    d = df[
        (df.status == "ok")
        & (df.family == "yolov8")
        & (df.backend == "cudagraph")
        & (df.precision == "fp16")
        & (df.batch == batch)
    ].copy()
    d["gflops_per_img"] = d.flops_per_img / 1e9
    d["depth multiplier"] = d.depth.map(lambda v: f"{v:g}")
    d["preset"] = d.scale.where(d.scale != "", d.width.map(lambda v: f"w{v:g}"))
    fig = px.scatter(
        d.sort_values("gflops_per_img"),
        x="gflops_per_img",
        y="img_per_s",
        color="depth multiplier",
        text="preset",
        log_x=True,
        log_y=True,
        hover_data=[c for c in ("width", "depth", "median_ms") if c in d],
        template=TEMPLATE,
        title=f"YOLOv8 presets: images per second against GFLOPs, CUDA graph fp16, batch {batch}",
    )
    fig.update_traces(textposition="top center", marker={"size": 10})
    fig.update_xaxes(title_text="GFLOPs per image")
    fig.update_yaxes(title_text="images per second")
    return finish(fig)


@needs("sweep_presets")
def presets(root: DataRoot):
    """The shipped preset sweep, where width and depth grow together (context for the pairs)."""
    return plot_presets(root.load("sweep_presets"))


def plot_pair_ratios(t: pd.DataFrame, y: str = "wide_over_deep", y_title: str = ""):
    """``y`` of each pair (one line per pair) against batch, one panel per backend."""
    import plotly.express as px

    d = t.sort_values(["pair", "batch"]).copy()
    d["pair"] = [
        f"w{a:g}/d{b:g} vs w{c:g}/d{e:g}"
        for a, b, c, e in zip(d.width_wide, d.depth_wide, d.width_deep, d.depth_deep, strict=True)
    ]
    fig = px.line(
        d,
        x="batch",
        y=y,
        color="pair",
        facet_col="backend",
        markers=True,
        log_x=True,
        template=TEMPLATE,
        title=y_title or y,
    )
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_xaxes(title_text="batch size")
    fig.update_yaxes(title_text=y_title or y, col=1)
    return finish(fig)


@needs(shapes.WIDE_DEEP)
def pair_table(root: DataRoot):
    """Both models of each pair side by side per backend and batch."""
    t = shapes.pair_table(root.load(shapes.WIDE_DEEP))
    cols = [
        "pair", "backend", "batch", "width_wide", "depth_wide", "width_deep", "depth_deep",
        "flops_diff_pct", "img_per_s_wide", "img_per_s_deep", "wide_over_deep",
        "kernels_per_forward_wide", "kernels_per_forward_deep", "occupancy_diff_pct",
    ]  # fmt: skip
    return show(t[[c for c in cols if c in t]], index=False)


@needs(shapes.WIDE_DEEP)
def ratio_figure(root: DataRoot):
    t = shapes.pair_table(root.load(shapes.WIDE_DEEP))
    return plot_pair_ratios(t, "wide_over_deep", "wide model's img/s over the deep model's")


@needs(shapes.WIDE_DEEP)
def occupancy_figure(root: DataRoot):
    t = shapes.pair_table(root.load(shapes.WIDE_DEEP))
    if "occupancy_diff_pct" not in t:
        return "The table holds no occupancy pass."
    return plot_pair_ratios(
        t, "occupancy_diff_pct", "achieved occupancy, wide minus deep (percentage points)"
    )


# --- 15 · resolutions -----------------------------------------------------------------------


def selection(frames=FRAMES, engines=ENGINES) -> pd.DataFrame:
    """Which engine :func:`yolo_sm.topics.shapes.analyse.pick_engine` serves each frame with."""
    return shapes.selection_table(frames, engines)


def plot_selection(frames=FRAMES, engines=ENGINES):
    """Per frame size, the share of the chosen engine's input the letterboxed frame fills,
    coloured by the engine."""
    import plotly.express as px

    d = selection(frames, engines)
    d["engine input"] = d.engine
    fig = px.bar(
        d,
        x="frame",
        y="fill_pct",
        color="engine input",
        hover_data=["scale"],
        template=TEMPLATE,
        title="The engine each frame size is served by, and how much of its input the frame fills",
    )
    fig.update_xaxes(title_text="frame size (width x height)")
    fig.update_yaxes(title_text="share of the engine input filled (%)", range=[0, 105])
    return finish(fig)


def plot_resolutions(df: pd.DataFrame, y: str = "mpix_per_s"):
    """``y`` against the engine input's megapixels, one line per (width, engine)."""
    import plotly.express as px

    d = df[df.status == "ok"].copy()
    d["input_mpix"] = d.imgsz_h * d.imgsz_w / 1e6
    d["engine kind"] = [
        f"w{w:g} {e} ({b})" for w, e, b in zip(d.width, d.engine, d.backend, strict=True)
    ]
    titles = {"mpix_per_s": "megapixels of input per second", "img_per_s": "images per second"}
    fig = px.line(
        d.sort_values("input_mpix"),
        x="input_mpix",
        y=y,
        color="engine kind",
        markers=True,
        hover_data=[c for c in ("frame_size", "imgsz_w", "imgsz_h", "median_ms") if c in d],
        template=TEMPLATE,
        title=f"{titles.get(y, y)} against input size, batch {int(d.batch.iloc[0])}"
        if len(d)
        else y,
    )
    fig.update_xaxes(title_text="engine input (megapixels)")
    fig.update_yaxes(title_text=titles.get(y, y))
    return finish(fig)


@needs(shapes.RESOLUTIONS)
def resolution_figure(root: DataRoot, y: str = "mpix_per_s"):
    return plot_resolutions(root.load(shapes.RESOLUTIONS), y)


@needs(shapes.RESOLUTIONS)
def cost_table(root: DataRoot):
    """Fixed against dynamic per width and resolution: img/s, megapixels/s, the dynamic cost."""
    t = shapes.resolution_table(root.load(shapes.RESOLUTIONS))
    cols = [
        "width", "frame_size", "imgsz_w", "imgsz_h", "backend_fixed", "img_per_s_fixed",
        "backend_dynamic", "img_per_s_dynamic", "mpix_per_s_fixed", "mpix_per_s_dynamic",
        "dynamic_cost_pct",
    ]  # fmt: skip
    return show(t[[c for c in cols if c in t]], index=False)

"""Figures and tables of notebook 14 (wider or deeper at the same FLOPs)."""

from __future__ import annotations

from functools import partial

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.sections import needs, section
from yolo_sm.report.style import finish
from yolo_sm.report.tables import show
from yolo_sm.topics.wide_deep import analyse


@needs("sweep_presets")
def presets(root: DataRoot, batch: int = 64):
    """img/s against GFLOPs of the YOLOv8 presets (CUDA graph fp16, ``batch``), by depth."""
    import plotly.express as px

    df = root.load("sweep_presets")
    d = df[(df.status == "ok") & (df.family == "yolov8") & (df.backend == "cudagraph")
           & (df.precision == "fp16") & (df.batch == batch)].copy()  # fmt: skip
    d["gflops_per_img"] = d.flops_per_img / 1e9
    d["depth multiplier"] = d.depth.map("{:g}".format)
    d["preset"] = d.scale.where(d.scale != "", d.width.map("w{:g}".format))
    fig = px.scatter(d.sort_values("gflops_per_img"), x="gflops_per_img", y="img_per_s",
                     color="depth multiplier", text="preset", log_x=True, log_y=True,
                     hover_data=["width", "depth", "median_ms"], template=TEMPLATE,
                     title="YOLOv8 presets: images per second against GFLOPs, CUDA graph fp16, "
                     f"batch {batch}")  # fmt: skip
    fig.update_traces(textposition="top center", marker={"size": 10})
    return finish(fig, "GFLOPs per image", "images per second")


def plot_pair_ratios(t: pd.DataFrame, y: str, y_title: str):
    """``y`` of each pair against batch, one panel per backend."""
    import plotly.express as px

    d = t.sort_values(["pair", "batch"]).copy()
    d["pair"] = [
        f"w{a:g}/d{b:g} vs w{c:g}/d{e:g}"
        for a, b, c, e in zip(d.width_wide, d.depth_wide, d.width_deep, d.depth_deep, strict=True)
    ]
    fig = px.line(d, x="batch", y=y, color="pair", facet_col="backend", markers=True,
                  log_x=True, template=TEMPLATE, title=y_title)  # fmt: skip
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(title_text=y_title, col=1)
    return finish(fig, "batch size")


#: both models of each pair side by side per backend and batch
PAIR_COLUMNS = (
    "pair", "backend", "batch", "width_wide", "depth_wide", "width_deep", "depth_deep",
    "flops_diff_pct", "img_per_s_wide", "img_per_s_deep", "wide_over_deep",
    "kernels_per_forward_wide", "kernels_per_forward_deep", "occupancy_diff_pct",
)  # fmt: skip
pair_table = section(analyse.DATASET, analyse.pair_table, partial(show, columns=PAIR_COLUMNS))


@needs(analyse.DATASET)
def ratio_figure(root: DataRoot):
    t = analyse.pair_table(root.load(analyse.DATASET))
    return plot_pair_ratios(t, "wide_over_deep", "wide model's img/s over the deep model's")


@needs(analyse.DATASET)
def occupancy_figure(root: DataRoot):
    t = analyse.pair_table(root.load(analyse.DATASET))
    if "occupancy_diff_pct" not in t:
        return "The table holds no occupancy pass."
    title = "estimated occupancy, wide minus deep (percentage points)"
    return plot_pair_ratios(t, "occupancy_diff_pct", title)

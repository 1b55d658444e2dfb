"""Figures and tables of notebook 15 (one engine per resolution or one dynamic engine)."""

from __future__ import annotations

from functools import partial

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.sections import needs, section
from yolo_sm.report.style import finish
from yolo_sm.report.tables import show
from yolo_sm.topics.resolutions import analyse

#: the engine sizes of notebook 15 and the frames its selector figure serves
ENGINES = ("640x640", "1280x736", "1920x1088")
FRAMES = ("640x480", "640x640", "1280x720", "1280x1024", "1920x1080", "2560x1440", "3840x2160")


def selection(frames=FRAMES, engines=ENGINES):
    """Which engine each frame is served by, as a table."""
    return show(analyse.selection_table(frames, engines), index=False)


def plot_selection(frames=FRAMES, engines=ENGINES):
    """Per frame size, the share (%) of the chosen engine's input it fills."""
    import plotly.express as px

    d = analyse.selection_table(frames, engines).rename(columns={"engine": "engine input"})
    fig = px.bar(d, x="frame", y="fill_pct", color="engine input", hover_data=["scale"],
                 template=TEMPLATE,
                 title="The engine each frame size is served by, and how much of its input "
                 "the frame fills")  # fmt: skip
    fig.update_yaxes(title_text="share of the engine input filled (%)", range=[0, 105])
    return finish(fig, "frame size (width x height)")


def plot_resolutions(df: pd.DataFrame, y: str = "mpix_per_s"):
    """``y`` against the engine input's megapixels, one line per (width, engine)."""
    import plotly.express as px

    d = df[df.status == "ok"].copy()
    d["input_mpix"] = d.imgsz_h * d.imgsz_w / 1e6
    d["engine kind"] = [
        f"w{w:g} {e} ({b}, batch {n})"
        for w, e, b, n in zip(d.width, d.engine, d.backend, d.batch, strict=True)
    ]
    what = {"mpix_per_s": "megapixels of input per second", "img_per_s": "images per second"}[y]
    fig = px.line(d.sort_values("input_mpix"), x="input_mpix", y=y, color="engine kind",
                  markers=True, hover_data=[c for c in ("frame_size", "median_ms") if c in d],
                  template=TEMPLATE,
                  title=f"{what} against input size")  # fmt: skip
    return finish(fig, "engine input (megapixels)", what)


@needs(analyse.DATASET)
def resolution_figure(root: DataRoot, y: str = "mpix_per_s"):
    return plot_resolutions(root.load(analyse.DATASET), y)


#: fixed against dynamic per width and resolution: img/s, megapixels/s, cost
COST_COLUMNS = (
    "width", "batch", "frame_size", "imgsz_w", "imgsz_h", "backend_fixed", "img_per_s_fixed",
    "backend_dynamic", "img_per_s_dynamic", "mpix_per_s_fixed", "mpix_per_s_dynamic",
    "dynamic_cost_pct",
)  # fmt: skip
cost_table = section(analyse.DATASET, analyse.resolution_table, partial(show, columns=COST_COLUMNS))

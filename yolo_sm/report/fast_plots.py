"""Figures of the fast-engines notebook (08): speed-up against width, frames to boxes."""

from __future__ import annotations

from yolo_sm.analyse.fast import engines, variant_order
from yolo_sm.report.colors import TEMPLATE


def plot_speedup_vs_width(bench, title: str | None = None):
    """Each engine's img/s over the baseline's against width, one panel per batch (model-only,
    the same unit of the run); the dotted line is the baseline."""
    import plotly.express as px

    e = engines(bench).sort_values("width")
    fig = px.line(
        e,
        x="width",
        y="vs_baseline",
        color="variant",
        facet_col="batch",
        markers=True,
        hover_data=[c for c in ("img_per_s", "median_ms", "build_s") if c in e],
        category_orders={
            "variant": [v for v in variant_order(bench) if v in set(e.variant)],
            "batch": sorted(e.batch.unique()),
        },
        template=TEMPLATE,
        title=title or "Speed-up over eager fp16 NHWC (img/s ratio, same run) vs width",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.for_each_annotation(lambda a: a.update(text=f"batch {a.text.split('=')[-1]}"))
    fig.update_yaxes(title_text="x baseline", col=1)
    fig.update_xaxes(title_text="width")
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return fig


def plot_pipeline(pipe, title: str | None = None):
    """Frames/s against width per batch: each pipeline row, its engine model-only and
    YOLO.predict (log scale)."""
    import pandas as pd
    import plotly.express as px

    first = pipe.drop_duplicates(["width", "batch"])
    long = pd.concat(
        [
            pipe.assign(what=pipe["streams"].map(lambda s: f"pipeline, {s:g} stream(s)"))[
                ["width", "batch", "what", "img_per_s"]
            ],
            first.assign(what="engine model-only", img_per_s=first["model_only_img_per_s"])[
                ["width", "batch", "what", "img_per_s"]
            ],
            first.assign(what="YOLO.predict", img_per_s=first["predict_img_per_s"])[
                ["width", "batch", "what", "img_per_s"]
            ],
        ],
        ignore_index=True,
    ).sort_values("width")
    fig = px.line(
        long,
        x="width",
        y="img_per_s",
        color="what",
        facet_col="batch",
        markers=True,
        log_y=True,
        template=TEMPLATE,
        title=title or "Frames to boxes: our pipeline vs its engine alone vs YOLO.predict",
    )
    fig.for_each_annotation(lambda a: a.update(text=f"batch {a.text.split('=')[-1]}"))
    fig.update_yaxes(title_text="frames/s", col=1)
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return fig

"""Notebook 09: the claims' verdicts for one root (:data:`yolo_sm.topics.claims.rules.RULES`),
claim 1's table and the evidence figures."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import concat
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config
from yolo_sm.report import plots
from yolo_sm.report.colors import TEMPLATE, color_map
from yolo_sm.report.rules import evaluate
from yolo_sm.report.sections import Note, needs
from yolo_sm.report.style import finish
from yolo_sm.report.text import code
from yolo_sm.topics.claims import analyse as analyse_claims
from yolo_sm.topics.claims.rules import RULES
from yolo_sm.topics.heatmaps import analyse as analyse_heatmaps


def facts(root: DataRoot) -> pd.DataFrame:
    """Every fact the claims' rules read from ``root``: the topics' facts the claims share
    (:func:`yolo_sm.topics.claims.analyse.topic_facts`) and the claims' own."""
    topic = analyse_claims.topic_facts(root)
    return concat(topic, analyse_claims.facts(root, topic))


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The claims' verdict table for ``root`` (:func:`yolo_sm.report.rules.evaluate`)."""
    return evaluate(RULES, facts(root), root.name)


@needs("sweep_fp16_nhwc")
def flops_table(root: DataRoot):
    """Claim 1, fixed by the model's structure: FLOPs per image per width and their rise from
    width 1.0 (%), beside the article's 56 % for width 1.25."""
    f = analyse_claims.flops_by_width(root.load("sweep_fp16_nhwc"))
    base = f.set_index("width").flops_per_img.get(1.0)
    f["rise_from_w1_pct"] = 100 * (f.flops_per_img / base - 1) if base else float("nan")
    return f


# ---- evidence figures for notebook 09 ------------------------------------------------------


@needs("ncu_width_b8")
def occupancy_figure(root: DataRoot):
    """Time-weighted achieved occupancy per width, batch 8 (claims 2 and 3)."""
    table = analyse_heatmaps.layer_table(root.load(analyse_heatmaps.WIDTH_NCU))
    s = analyse_heatmaps.config_summary(table, by="width")
    df = pd.DataFrame(
        {"width": s.width, "pct": s.achieved_occupancy_tw_pct, "occupancy": "achieved"}
    )
    return plots.plot_throughput(
        df,
        x="width",
        y="pct",
        color="occupancy",
        log_y=False,
        title=f"YOLOv8 fp16 NHWC batch 8: time-weighted occupancy (%) vs width "
        f"({root.device_name()}, Nsight Compute)",
    )


@needs("ncu_throughput_w1")
def occupancy_vs_tensor_figure(root: DataRoot):
    """Every kernel of the YOLOv8 throughput set: theoretical occupancy against tensor-pipe use,
    marker area ~ duration (claim 6)."""
    import plotly.express as px

    k = add_kernel_class(root.load("ncu_throughput_w1"))
    fig = px.scatter(
        k,
        x="theoretical_occupancy_pct",
        y="tensor_pipe_pct",
        color="kernel_class",
        size="duration_us",
        size_max=30,
        facet_col="config",
        hover_data=["layer", "grid_size"],
        template=TEMPLATE,
        color_discrete_map=color_map(k.kernel_class.unique()),
        title=f"Tensor-pipe use against theoretical occupancy per kernel ({root.device_name()}, "
        "Nsight Compute)",
    )
    fig.add_vline(x=60, line_dash="dot")
    fig.update_xaxes(title_text="theoretical occupancy (%)")
    fig.update_yaxes(title_text="tensor pipe (% of peak)", col=1)
    return finish(fig)


@needs("sweep_fp16_nhwc")
def batch_figure(root: DataRoot):
    """img/s against batch per width and backend (claims 5 and 7)."""
    s = root.load("sweep_fp16_nhwc")
    return plots.plot_throughput(
        s[s.width.isin([0.5, 1.0, 2.0])],
        x="batch",
        y="img_per_s",
        color="backend",
        facet_col="width",
        title=f"fp16 NHWC img/s vs batch ({root.device_name()})",
    )


@needs("sweep_fp16_nhwc")
def memory_figure(root: DataRoot):
    """Peak memory of the timed eager forwards against batch, per width (claim 8)."""
    s = root.load("sweep_fp16_nhwc")
    e = s[(s.backend == "eager") & (s.status == "ok")]
    if "peak_mem_bytes" not in e or e.peak_mem_bytes.isna().all():  # a sweep on a CPU
        return Note(f"The sweep of {code(root.name)} measured no GPU memory: no peak to show.")
    return plots.plot_throughput(
        e.assign(peak_mem_gb=e.peak_mem_bytes / 1e9),
        x="batch",
        y="peak_mem_gb",
        color="width",
        title=f"Peak memory (GB) vs batch, eager fp16 NHWC ({root.device_name()})",
    )


@needs("ncu_precision_w1")
def layout_figure(root: DataRoot):
    """GPU time per forward (summed kernel durations) per precision and layout (claim 16)."""
    n = root.load("ncu_precision_w1")
    t = n.groupby("config", as_index=False).duration_us.sum()
    parts = t.config.map(lambda c: parse_config(c, strict=False))
    t = t.assign(
        precision=[p["precision"] for p in parts],
        layout=[p["layout"] for p in parts],
        ms_per_forward=t.duration_us / 1e3,
    )
    return plots.plot_bars(
        t,
        x="precision",
        y="ms_per_forward",
        color="layout",
        title=f"YOLOv8 width 1.0 batch 8: GPU ms per forward by precision and layout "
        f"({root.device_name()}, Nsight Compute)",
    )

"""Notebook 09: the claims' verdicts for one root and claim 1's table."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import concat
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import plots
from yolo_sm.report.rules import evaluate, topic_rules
from yolo_sm.report.sections import needs
from yolo_sm.topics.claims import analyse as analyse_claims
from yolo_sm.topics.width.analyse import flops_by_width


def facts(root: DataRoot) -> pd.DataFrame:
    """Every fact the claims' rules read: the topics' shared facts and the claims' own."""
    topic = analyse_claims.topic_facts(root)
    return concat(topic, analyse_claims.facts(root, topic))


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The claims' verdict table for ``root`` (:func:`yolo_sm.report.rules.evaluate`)."""
    return evaluate(topic_rules("claims"), facts(root), root.name)


@needs("sweep_fp16_nhwc")
def flops_table(root: DataRoot):
    """Claim 1 (fixed by structure): FLOPs per image per width and their rise from width 1 (%)."""
    f = flops_by_width(root.load("sweep_fp16_nhwc"))
    base = f.set_index("width").flops_per_img.get(1.0)
    f["rise_from_w1_pct"] = 100 * (f.flops_per_img / base - 1) if base else float("nan")
    return f


@needs("sweep_fp16_nhwc")
def flops_figure(root: DataRoot):
    """Claim 1's table as bars: GFLOPs per image by width."""
    t = flops_table(root)
    t = t.assign(width=t.width.map("{:g}".format), gflops_per_img=t.flops_per_img / 1e9)
    title = "YOLOv8 GFLOPs per image by width (the article: width 1.25 costs 56 % more than 1.0)"
    return plots.plot_bars(t, x="width", y="gflops_per_img", title=title)

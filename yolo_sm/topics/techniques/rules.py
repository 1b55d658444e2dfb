"""Findings of the techniques notebook (13), as rules over the facts of
:func:`yolo_sm.topics.techniques.analyse.facts`."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.rules import Rule, check_unique, evaluate, rule_maker
from yolo_sm.topics.techniques import analyse as techniques
from yolo_sm.topics.techniques.analyse import scope

GROUP = "13_techniques"
DATASETS = (techniques.DATASET,)


_make = rule_maker("techniques", GROUP)


def _finding(fid, statement, key, op, threshold, unit, sc="", partly=None) -> Rule:
    return _make(fid, statement, f"techniques.{key}", op, threshold, unit, DATASETS, partly, sc)


#: One rule per finding of notebook 13.
RULES: tuple[Rule, ...] = check_unique(
    (
        _finding(
            "fusion_b16",
            "Fusing conv + BN + ReLU (BN folded, bias, residual add and ReLU in the "
            "convolution's cuDNN call) speeds ResNet-101 at least 1.2x at batch 16 (eager)",
            "fusion_speedup",
            ">=",
            1.2,
            "x",
            scope("eager", 16),
            partly=1.05,
        ),
        _finding(
            "fusion_b16_graph",
            "Fusing conv + BN + ReLU speeds ResNet-101 at least 1.2x at batch 16 inside one "
            "CUDA graph",
            "fusion_speedup",
            ">=",
            1.2,
            "x",
            scope("cudagraph", 16),
            partly=1.05,
        ),
        _finding(
            "fusion_b64",
            "Fusing conv + BN + ReLU speeds ResNet-101 at least 1.2x at batch 64 (eager)",
            "fusion_speedup",
            ">=",
            1.2,
            "x",
            scope("eager", 64),
            partly=1.05,
        ),
        _finding(
            "bn_fold_alone_small",
            "Folding BN into the convolutions alone (no bias, add or ReLU fused) gains under "
            "1.1x at batch 16 (eager)",
            "bn_fold_speedup",
            "<",
            1.1,
            "x",
            scope("eager", 16),
        ),
        _finding(
            "fusion_elementwise_drop",
            "Fusion cuts the elementwise share of ResNet-101's kernel time by at least 30 "
            "percentage points at batch 16",
            "fusion_elementwise_drop_pct",
            ">=",
            30.0,
            "%",
            scope("eager", 16),
            partly=10.0,
        ),
        _finding(
            "fusion_kernels_halved",
            "Fusion at least halves ResNet-101's kernels per forward at batch 16",
            "fusion_kernels_ratio",
            "<=",
            0.5,
            "x",
            scope("eager", 16),
        ),
        _finding(
            "autocast_near_half",
            "autocast on the fp32 model runs within 10 % of the model cast to half (img/s "
            "ratio, median over widths and batches, eager)",
            "autocast_over_half_median",
            ">=",
            0.9,
            "x",
            scope("eager"),
            partly=0.75,
        ),
        _finding(
            "autocast_near_half_graph",
            "Inside one CUDA graph, autocast runs within 10 % of the half model (median)",
            "autocast_over_half_median",
            ">=",
            0.9,
            "x",
            scope("cudagraph"),
            partly=0.75,
        ),
        _finding(
            "autocast_error_no_worse",
            "autocast's error against fp32 is at most 1.1x the half model's (median ratio)",
            "autocast_error_over_half_median",
            "<=",
            1.1,
            "x",
        ),
        _finding(
            "autocast_keeps_no_fp32",
            "autocast leaves no YOLOv8 module type with an fp32 output (most types of any width)",
            "autocast_fp32_module_types",
            "<=",
            0.0,
            "types",
        ),
        _finding(
            "buffer_gain",
            "A preallocated batch buffer gains at least 15 % over a new torch.stack per step "
            "(assembly + forward, eager, the faster way to fill it, median over batches; the "
            "article's claim)",
            "buffer_step_gain_pct",
            ">=",
            15.0,
            "%",
            scope("eager"),
            partly=5.0,
        ),
        _finding(
            "buffer_gain_graph",
            "With one CUDA graph, writing the batch into the graph's input gains at least 15 % "
            "over stacking it and copying it in (median over batches)",
            "buffer_step_gain_pct",
            ">=",
            15.0,
            "%",
            scope("cudagraph"),
            partly=5.0,
        ),
        _finding(
            "buffer_assembly_gain",
            "Assembling into a preallocated buffer is at least 15 % faster than a new "
            "torch.stack, the assembly alone (median over batches)",
            "buffer_assembly_gain_pct",
            ">=",
            15.0,
            "%",
            scope("none"),
            partly=5.0,
        ),
    )
)


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The findings' verdict table for ``root``."""
    return evaluate(RULES, techniques.facts(root), root.name)

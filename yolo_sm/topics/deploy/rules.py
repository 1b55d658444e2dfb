"""Notebook 10's rules; one with no datasets reads every probe or pipeline bench its root holds."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot, known_names
from yolo_sm.report.rules import Rule, evaluate, validate
from yolo_sm.topics.deploy.analyse import DEPLOY_BENCHES as DEPLOY
from yolo_sm.topics.deploy.analyse import FACT_KEYS, TRACE_COMPILE, TRACE_FP8, facts

G = "10_fast_engines"
CACHE = ("bench_compile_cache",)

RULES: tuple[Rule, ...] = validate(
    (
        Rule("fast_b1_speedup", "At batch 1 the fastest 16-bit model-only engine delivers at "
             "least 3x the img/s of eager fp16 NHWC measured in the same process (median over "
             "the deploy bench's models)", "fast.best16_img_per_s_over_baseline_median", ">=",
             3.0, "x", datasets=DEPLOY, scope="batch=1", group=G),
        Rule("fast_b64_speedup", "At batch 64 the fastest 16-bit model-only engine delivers at "
             "least 1.3x the img/s of eager fp16 NHWC measured in the same process (median over "
             "the deploy bench's models)", "fast.best16_img_per_s_over_baseline_median", ">=",
             1.3, "x", datasets=DEPLOY, scope="batch=64", group=G),
        Rule("fast_pipeline_beats_predict", "In every (model, batch) unit of the deploy bench "
             "the fastest frames-to-boxes pipeline delivers at least 3x the frames/s of "
             "ultralytics' YOLO.predict on the same frames (the least ratio over the units)",
             "fast.pipeline_over_predict_min", ">=", 3.0, "x", partly=1.0, datasets=DEPLOY,
             group=G),
        Rule("fast_pipeline_graph_never_slower", "In every (width, batch) unit benched in both "
             "modes, the pipeline with the whole batch in one CUDA graph delivers at least the "
             "frames/s of the full-NMS pipeline around the same engine (the best stream count "
             "of each)", "fast.pipeline_graph_over_full_min", ">=", 1.0, "x", group=G),
        Rule("fast_compile_gain_outside_convs", "torch.compile's gain over eager comes from "
             "outside the convolutions: at YOLOv8 width 1.0, batch 64, fp16 NHWC they account "
             "for under 20 % of the GPU time per forward it saves",
             "fast.compile_saving_from_convolutions_pct", "<", 20.0, "%",
             datasets=(TRACE_FP8, TRACE_COMPILE), group=G),
        Rule("fast_probe_engine_dominates", "In every pipeline probe the engine is at least "
             "half of a batch's stage time (stages run alone; the smallest share over the "
             "probes)", "fast.probe_engine_share_pct", ">=", 50.0, "%", group=G),
        Rule("fast_probe_compiled_stages", "In every pipeline probe the letterbox and the "
             "decode as the whole-batch graph runs them take at most half the GPU time they take "
             "eager (stages run alone; the largest ratio over the probes)",
             "fast.probe_compiled_stages_over_eager", "<=", 0.5, "x", group=G),
        Rule("fast_probe_streams_overlap", "In every pipeline probe three batches in flight "
             "overlap: a batch takes at least 1.2x as long with one stream as with three (the "
             "smallest ratio over the probes)", "fast.probe_1_over_3_streams", ">=", 1.2, "x",
             group=G),
        Rule("fast_cache_speeds_compile", "A warm inductor cache makes the default-mode compile "
             "of YOLOv8 width 0.5 at batch 64 at least 2x faster than a cold one (a fresh "
             "process each)", "fast.cold_over_warm_compile", ">=", 2.0, "x", partly=1.2,
             datasets=CACHE, scope="mode=default, width=0.5, batch=64", group=G),
    ),
    FACT_KEYS,
    known_names(),
)  # fmt: skip


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The verdict table of :data:`RULES` for ``root``."""
    return evaluate(RULES, facts(root), root.name)

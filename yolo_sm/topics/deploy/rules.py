"""Headline findings of the fast-engines notebook (10), as rules over the facts of
:func:`yolo_sm.topics.deploy.analyse.facts`."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.rules import Rule, check_unique, evaluate, rule_maker
from yolo_sm.topics.deploy import analyse as fast
from yolo_sm.topics.deploy import frames

BENCH = ("bench_fast_engines",)
FP8 = ("trace_fp8_w1_b64",)
COMPILE = ("trace_fp8_w1_b64", "trace_compile_w1_b64")
#: the probe findings read every probe of the root (dataset role ``probe``): their verdicts name
#: the probes their facts came from
PROBE: tuple[str, ...] = ()
CACHE = ("bench_compile_cache",)


_make = rule_maker("fast", "10_fast_engines")


def _finding(fid, statement, key, op, threshold, unit, datasets, scope="", partly=None) -> Rule:
    return _make(fid, statement, f"fast.{key}", op, threshold, unit, datasets, partly, scope)


#: One rule per headline finding of notebook 10.
RULES: tuple[Rule, ...] = check_unique(
    (
        _finding(
            "b1_speedup",
            "At batch 1 the best 16-bit engine runs at least 3x the baseline's img/s "
            "(median over widths): launch overhead dominates an eager forward",
            "best16_img_per_s_over_baseline_median",
            ">=",
            3.0,
            "x",
            BENCH,
            "batch=1",
        ),
        _finding(
            "b64_speedup",
            "At batch 64 the best 16-bit engine still runs at least 1.3x the baseline's img/s "
            "(median over widths)",
            "best16_img_per_s_over_baseline_median",
            ">=",
            1.3,
            "x",
            BENCH,
            "batch=64",
        ),
        _finding(
            "pipeline_beats_predict",
            "The frames-to-boxes pipeline delivers at least 3x YOLO.predict's frames/s "
            "(median over its rows)",
            "pipeline_over_predict_median",
            ">=",
            3.0,
            "x",
            BENCH,
            partly=1.0,
        ),
        _finding(
            "all_rows_ran",
            "Every variant of the bench ran and passed its numerical check",
            "rows_not_run",
            "<=",
            0.0,
            "rows",
            BENCH,
        ),
        _finding(
            "fp8_quantise_eats_gain",
            "Quantising to fp8 costs more than the fp8 convolutions save: their time with the "
            "quantisation passes is at least the fp16 convolutions' with their bias-add and "
            "SiLU kernels",
            "fp8_conv_with_quantise_over_fp16_conv",
            ">=",
            1.0,
            "x",
            FP8,
        ),
        _finding(
            "compile_gain_outside_convs",
            "torch.compile's gain comes from outside the convolutions: they account for under "
            "20 % of the GPU time it saves per forward",
            "compile_saving_from_convolutions_pct",
            "<",
            20.0,
            "%",
            COMPILE,
        ),
        _finding(
            "compile_fuses_launches",
            "torch.compile launches at most two thirds of eager's kernels per forward",
            "compile_launches_over_eager",
            "<=",
            2 / 3,
            "x",
            COMPILE,
        ),
        _finding(
            "compiled_pools_small",
            "Under torch.compile, inductor's max-pool kernels (SPPF's three 5x5 pools) take at "
            "most 3 % of a forward's GPU time in every traced compiled engine (the largest "
            "share; a mode with +sep-pool computes them as two 1-D pools)",
            "compiled_pool_share_max_pct",
            "<=",
            3.0,
            "%",
            fast.COMPILED_TRACES,
            partly=6.0,
        ),
        _finding(
            "probe_engine_dominates",
            "In every pipeline probe, the engine is at least half of a batch's stage time "
            "(stages run alone; the smallest share over the probes)",
            "probe_engine_share_pct",
            ">=",
            50.0,
            "%",
            PROBE,
        ),
        _finding(
            "warm_compile_fast",
            "With a warm inductor cache, torch.compile (default mode) builds YOLOv8 width 0.5 "
            "at batch 64 in at most 60 s",
            "warm_compile_s",
            "<=",
            60.0,
            "s",
            CACHE,
            "mode=default, width=0.5, batch=64",
        ),
        _finding(
            "cache_speeds_compile",
            "A warm inductor cache makes the default-mode compile of YOLOv8 width 0.5 at batch "
            "64 at least 2x faster than a cold one (a fresh process each)",
            "cold_over_warm_compile",
            ">=",
            2.0,
            "x",
            CACHE,
            "mode=default, width=0.5, batch=64",
            partly=1.2,
        ),
        _finding(
            "probe_compiled_stages",
            "In every pipeline probe, the letterbox and the decode as the whole-batch graph runs "
            "them take at most half the GPU time they take eager (stages run alone; the largest "
            "ratio over the probes)",
            "probe_compiled_stages_over_eager",
            "<=",
            0.5,
            "x",
            PROBE,
        ),
        _finding(
            "pipeline_graph_never_slower",
            "In every unit benched in both modes, the pipeline with the whole batch in one CUDA "
            "graph delivers at least the frames/s of the full-NMS pipeline around the same "
            "engine (the best stream count of each)",
            "pipeline_graph_over_full_min",
            ">=",
            1.0,
            "x",
            frames.PIPELINE_DATASETS,
        ),
        _finding(
            "pipeline_graph_speedup",
            "The whole-batch graph pipeline delivers at least 1.3x the frames/s of the "
            "full-NMS pipeline (median over the units benched in both modes)",
            "pipeline_graph_over_full_median",
            ">=",
            1.3,
            "x",
            frames.PIPELINE_DATASETS,
        ),
        _finding(
            "probe_streams_overlap",
            "In every pipeline probe, three batches in flight overlap: a batch takes at least "
            "1.2x as long with one stream as with three (the smallest ratio over the probes)",
            "probe_1_over_3_streams",
            ">=",
            1.2,
            "x",
            PROBE,
        ),
    )
)


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The findings' verdict table for ``root``."""
    return evaluate(RULES, fast.facts(root), root.name)

"""Notebook 03's rules over :func:`yolo_sm.topics.batch.analyse.facts`, and (``PAIR_RULES``)
over a multi-GPU root against a one-GPU root (:func:`yolo_sm.topics.batch.multi_gpu.facts`)."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.batch.analyse import NCU, POOL_SWEEP, SATURATION, SWEEP, SWEEP_1280

G = "03_batch_sweep"
SATURATION_PCT = 100 * SATURATION

# fmt: off
RULES: tuple[Rule, ...] = check_unique([
    Rule("batch_pays", "Batching pays: the best batch gives at least 3x the img/s of batch 1 "
         "(eager, 640 px, width 1)", "batch_gain_b1_to_best", ">=", 3.0, "x", partly=1.5,
         scope="eager", datasets=(SWEEP,), group=G),
    Rule("batch_wide_saturates_by_b8", f"The widest model reaches {SATURATION_PCT:g} % of its "
         "best img/s by batch 8 (eager, 640 px)", "batch_frac_of_best_at_b8", ">=",
         SATURATION_PCT, "%", scope="widest", datasets=(SWEEP,), group=G),
    Rule("batch_narrow_needs_more", f"The narrowest model is still under {SATURATION_PCT:g} % "
         "of its best img/s at batch 8 (eager, 640 px): narrow models need bigger batches",
         "batch_frac_of_best_at_b8", "<", SATURATION_PCT, "%", scope="narrowest",
         datasets=(SWEEP,), group=G),
    Rule("batch_graph_wins_at_b1", "At batch 1 a CUDA graph replay beats eager by at least 1.2x "
         "at every width (640 px): the forward is launch-bound", "batch_graph_speedup_b1_min",
         ">=", 1.2, "x", partly=1.05, datasets=(SWEEP,), group=G),
    Rule("batch_graph_fades_from_b32", "From batch 32 up a CUDA graph gains under 10 % over "
         "eager at every width (640 px): the GPU work hides the launches",
         "batch_graph_speedup_from_b32_max", "<", 1.1, "x", partly=1.25, datasets=(SWEEP,),
         group=G),
    Rule("batch_achieved_occupancy_rises", "Time-weighted achieved occupancy rises by at least "
         "10 points from the smallest to the largest profiled batch (Nsight Compute, width 1)",
         "batch_ncu_achieved_occupancy_rise", ">=", 10.0, "pp", partly=5.0, datasets=(NCU,),
         group=G),
    Rule("batch_theoretical_occupancy_flat", "Time-weighted theoretical occupancy stays within "
         "10 points over every profiled batch (Nsight Compute, width 1): the launch "
         "configurations stay alike", "batch_ncu_theoretical_occupancy_range", "<", 10.0, "pp",
         partly=20.0, datasets=(NCU,), group=G),
    Rule("batch_memory_linear", "Eager peak memory is a straight line in batch (R² of at least "
         "0.99 at every width, 640 px)", "batch_memory_fit_r2_min", ">=", 0.99, partly=0.95,
         datasets=(SWEEP,), group=G),
    Rule("batch_memory_not_limiting", f"Throughput saturates before memory runs out: at every "
         f"width the knee batch ({SATURATION_PCT:g} % of the best img/s, eager, 640 px) peaks "
         "under 70 % of GPU memory", "batch_peak_mem_at_knee_pct", "<", 70.0, "%", partly=90.0,
         datasets=(SWEEP,), group=G),
    Rule("batch_memory_1280", "At 1280 px (4x the pixels) one image costs at least 3x its 640 px "
         "memory (eager, width 1)", "batch_memory_1280_over_640", ">=", 3.0, "x", partly=2.0,
         datasets=(SWEEP, SWEEP_1280), group=G),
    Rule("batch_graph_saves_no_memory", "With its private pool counted, a CUDA graph holds at "
         "least eager's peak memory at the largest batch, at every width",
         "batch_graph_footprint_ratio_min", ">=", 1.0, "x", partly=0.95,
         datasets=(POOL_SWEEP,), group=G),
])

PAIR_RULES: tuple[Rule, ...] = check_unique([
    Rule("multi_gpu_scales", "Collecting on N GPUs of the host takes at most 1/(0.8 N) of one "
         "GPU's wall time (speed-up over N, the scaling efficiency)",
         "multi_gpu.scaling_efficiency", ">=", 0.8, partly=0.6, datasets=("collect_tasks",),
         group=G),
    Rule("multi_gpu_alike", "The host's GPUs measure alike: per GPU, the median ratio of its "
         "points to the same points on one GPU lies within 3 % of every other GPU's "
         "(host-bound points left out)", "multi_gpu.gpu_median_spread_pct", "<=", 3.0, "%",
         partly=5.0, group=G),
    Rule("multi_gpu_same_tables", "The tables merged from the GPUs hold the same rows as the "
         "one-GPU run's (key columns and status of every table both hold)",
         "multi_gpu.table_mismatches", "<=", 0.0, "rows", group=G),
])
# fmt: on

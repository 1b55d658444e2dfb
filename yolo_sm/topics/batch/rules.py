"""Headline findings of notebook 03 (batch size), as rules over the facts of
:func:`yolo_sm.topics.batch.analyse.facts`."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.batch.analyse import GPM, NCU, POOL_SWEEP, SWEEP, SWEEP_1280
from yolo_sm.topics.compare.remeasure import TOLERANCE

GROUP = "03_batch_sweep"
#: share of its best img/s at which a model counts as saturated (the knee of the tables)
SATURATION_PCT = 90.0
#: a re-measured img/s "repeats" within this many percent of the first measure
REPEAT_PCT = 100 * TOLERANCE

RULES: tuple[Rule, ...] = check_unique(
    [
        Rule(
            id="batch_pays",
            statement="Batching pays: the best batch gives several times the img/s of batch 1 "
            "(eager, reference config)",
            fact="batch_gain_b1_to_best",
            scope="eager",
            op=">=",
            threshold=3.0,
            partly=1.5,
            unit="x",
            datasets=(SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_wide_saturates_by_b8",
            statement=f"The widest model reaches {SATURATION_PCT:g} % of its best img/s by "
            "batch 8 (eager, reference image size)",
            fact="batch_frac_of_best_at_b8",
            scope="widest",
            op=">=",
            threshold=SATURATION_PCT,
            unit="%",
            datasets=(SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_narrow_needs_more",
            statement=f"The narrowest model is still under {SATURATION_PCT:g} % of its best "
            "img/s at batch 8: narrow models need bigger batches",
            fact="batch_frac_of_best_at_b8",
            scope="narrowest",
            op="<",
            threshold=SATURATION_PCT,
            unit="%",
            datasets=(SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_graph_wins_at_b1",
            statement="At batch 1 a CUDA graph replay beats eager by at least 1.2x at every "
            "width: the forward is launch-bound",
            fact="batch_graph_speedup_b1_min",
            op=">=",
            threshold=1.2,
            partly=1.05,
            unit="x",
            datasets=(SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_graph_fades_from_b32",
            statement="From batch 32 up a CUDA graph gains under 10 % over eager at every "
            "width: the GPU work hides the launches",
            fact="batch_graph_speedup_from_b32_max",
            op="<",
            threshold=1.1,
            partly=1.25,
            unit="x",
            datasets=(SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_achieved_occupancy_rises",
            statement="Time-weighted achieved occupancy rises by at least 10 points from the "
            "smallest to the largest profiled batch",
            fact="batch_ncu_achieved_occupancy_rise",
            op=">=",
            threshold=10.0,
            partly=5.0,
            unit="pp",
            datasets=(NCU,),
            group=GROUP,
        ),
        Rule(
            id="batch_theoretical_occupancy_flat",
            statement="Time-weighted theoretical occupancy moves under 10 points across the "
            "profiled batches: the launch configurations stay the same",
            fact="batch_ncu_theoretical_occupancy_change",
            op="<",
            threshold=10.0,
            partly=20.0,
            unit="pp",
            datasets=(NCU,),
            group=GROUP,
        ),
        Rule(
            id="batch_gpm_sm_util_rises",
            statement="Whole-GPU SM utilisation (GPM) at the largest batch is at least twice "
            "that at batch 1",
            fact="batch_gpm_sm_util_ratio",
            op=">=",
            threshold=2.0,
            partly=1.25,
            unit="x",
            datasets=(GPM,),
            group=GROUP,
        ),
        Rule(
            id="batch_memory_linear",
            statement="Eager peak memory is a straight line in batch (R² of at least 0.99 at "
            "every width)",
            fact="batch_memory_fit_r2_min",
            op=">=",
            threshold=0.99,
            partly=0.95,
            datasets=(SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_memory_not_limiting",
            statement="Throughput saturates before memory runs out: every width's best batch "
            "peaks under 70 % of GPU memory (eager)",
            fact="batch_peak_mem_at_best_pct",
            op="<",
            threshold=70.0,
            partly=90.0,
            unit="%",
            datasets=(SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_memory_1280",
            statement="At 1280 px (4x the pixels) one image costs at least 3x its 640 px "
            "memory (eager, reference width)",
            fact="batch_memory_1280_over_640",
            op=">=",
            threshold=3.0,
            partly=2.0,
            unit="x",
            datasets=(SWEEP, SWEEP_1280),
            group=GROUP,
        ),
        Rule(
            id="batch_build_peaks_higher",
            statement="Building an engine peaks higher than its timed forwards in most points",
            fact="batch_build_above_timed_pct",
            op=">",
            threshold=50.0,
            partly=10.0,
            unit="%",
            datasets=(SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_graph_saves_no_memory",
            statement="With its private pool counted, a CUDA graph holds at least eager's peak "
            "memory at the largest batch, at every width",
            fact="batch_graph_footprint_ratio_min",
            op=">=",
            threshold=1.0,
            partly=0.95,
            unit="x",
            datasets=(POOL_SWEEP,),
            group=GROUP,
        ),
        Rule(
            id="batch_repeats_gpu_bound",
            statement=f"Where the GPU sets the pace (CUDA graph), a re-measure lands within "
            f"{REPEAT_PCT:g} % of the first at every point",
            fact="batch_remeasure_graph_max_dev_pct",
            op="<=",
            threshold=REPEAT_PCT,
            partly=2 * REPEAT_PCT,
            unit="%",
            datasets=(SWEEP, POOL_SWEEP),
            group=GROUP,
        ),
        Rule(
            id="batch_repeats_launch_bound",
            statement=f"Where the host sets the pace (host-bound points), the GPU's busy time "
            f"per forward repeats within {REPEAT_PCT:g} % at every point (their img/s is the "
            "host's and is not compared across runs)",
            fact="batch_remeasure_host_bound_gpu_busy_max_dev_pct",
            op="<=",
            threshold=REPEAT_PCT,
            partly=2 * REPEAT_PCT,
            unit="%",
            datasets=(SWEEP, POOL_SWEEP),
            group=GROUP,
        ),
    ]
)

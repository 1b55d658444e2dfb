"""The rules of notebook 17 (two models on one GPU), as data. The big-and-small pair: YOLOv8
width 1.0 at batch 16 (engine a) beside width 0.25 at batch 1 (engine b), CUDA graphs."""

from yolo_sm.report.rules import Rule, validate
from yolo_sm.topics.sharing.analyse import DATASET, FACT_KEYS, KERNELS

_G, _D = "17_two_models", (DATASET,)
_BIG_SMALL, _EQUAL = "pair=1x16+0.25x1", "pair=0.5x16+0.5x16"

RULES: tuple[Rule, ...] = validate(
    (
        Rule(
            id="sharing_streams_total", group=_G, datasets=_D,
            statement="On two streams of one process, width 1.0 batch 16 beside width 0.25 "
            "batch 1 deliver at least 1.2x the img/s of the faster engine alone (the small "
            "model fills SMs the big one leaves idle)",
            fact="sharing.sum_over_best_alone", scope=f"{_BIG_SMALL}, mode=streams",
            op=">=", threshold=1.2, partly=1.0, unit="x",
        ),
        Rule(
            id="sharing_processes_total", group=_G, datasets=_D,
            statement="In two processes the same pair still delivers at least 1.2x the img/s "
            "of the faster engine alone",
            fact="sharing.sum_over_best_alone", scope=f"{_BIG_SMALL}, mode=processes",
            op=">=", threshold=1.2, partly=1.0, unit="x",
        ),
        Rule(
            id="sharing_small_p99_streams", group=_G, datasets=_D,
            statement="The small model's p99 batch latency grows at most 2x when it shares the "
            "GPU with the big one on two streams",
            fact="sharing.p99_inflation", scope=f"{_BIG_SMALL}, mode=streams, engine=b",
            op="<=", threshold=2.0, partly=4.0, unit="x",
        ),
        Rule(
            id="sharing_small_p99_processes", group=_G, datasets=_D,
            statement="The small model's p99 batch latency grows at most 2x when it shares the "
            "GPU with the big one from another process",
            fact="sharing.p99_inflation", scope=f"{_BIG_SMALL}, mode=processes, engine=b",
            op="<=", threshold=2.0, partly=4.0, unit="x",
        ),
        Rule(
            id="sharing_equal_work_streams", group=_G, datasets=_D,
            statement="Two width-0.5 batch-16 engines on two streams do at least 1.1x the work "
            "of running them one after the other (each engine's together img/s over its alone "
            "img/s, summed)",
            fact="sharing.work_done", scope=f"{_EQUAL}, mode=streams",
            op=">=", threshold=1.1, partly=1.0, unit="x",
        ),
        Rule(
            id="sharing_small_overlaps_big", group=_G, datasets=(KERNELS,),
            statement="On two streams at least 50% of the small model's kernel time runs while "
            "a kernel of the big model runs too (kernels of both share the SMs)",
            fact="sharing.overlap_share", scope=f"{_BIG_SMALL}, mode=streams, engine=b",
            op=">=", threshold=0.5, unit="",
        ),
        Rule(
            id="sharing_streams_beat_processes", group=_G, datasets=_D,
            statement="Two streams of one process deliver at least 1.1x the summed img/s of "
            "two processes for the big and small pair",
            fact="sharing.streams_over_processes", scope=_BIG_SMALL,
            op=">=", threshold=1.1, partly=1.0, unit="x",
        ),
    ),
    FACT_KEYS,
    (DATASET, KERNELS),
)  # fmt: skip

"""The rules of notebook 14 (wider or deeper at the same FLOPs), as data."""

from yolo_sm.report.rules import Rule, validate
from yolo_sm.topics.wide_deep.analyse import DATASET, FACT_KEYS

_G, _D = "14_wide_or_deep", (DATASET,)

RULES: tuple[Rule, ...] = validate(
    (
        Rule(
            id="wide_deep_wide_faster_b64", group=_G, datasets=_D,
            statement="At equal FLOPs the wider model is faster at batch 64 in a CUDA graph: at "
            "least 1.1x the deeper model's img/s in every pair that ran at batch 64",
            fact="wide_deep.wide_over_deep_min", scope="backend=cudagraph, batch=64",
            op=">=", threshold=1.1, partly=1.0, unit="x",
        ),
        Rule(
            id="wide_deep_wide_faster_b1_eager", group=_G, datasets=_D,
            statement="At batch 1 in eager mode, where the host issues every launch, the wider "
            "model runs at least 1.2x the deeper model's img/s (median over pairs)",
            fact="wide_deep.wide_over_deep_median", scope="backend=eager, batch=1",
            op=">=", threshold=1.2, partly=1.0, unit="x",
        ),
        Rule(
            id="wide_deep_wide_higher_occupancy", group=_G, datasets=_D,
            statement="At batch 64 in a CUDA graph the wider model's kernels reach a higher "
            "time-weighted estimated occupancy than the deeper model's (Kineto's estimate: the "
            "theoretical occupancy capped by the grid, not a measurement; median over pairs)",
            fact="wide_deep.occupancy_wide_minus_deep_pct", scope="backend=cudagraph, batch=64",
            op=">", threshold=0.0, unit="points",
        ),
    ),
    FACT_KEYS,
    _D,
)  # fmt: skip

"""The rules of notebook 15 (one engine per resolution or one dynamic engine), as data."""

from yolo_sm.report.rules import Rule, validate
from yolo_sm.topics.resolutions.analyse import DATASET, FACT_KEYS

_G, _D = "15_resolutions", (DATASET,)

RULES: tuple[Rule, ...] = validate(
    (
        Rule(
            id="resolutions_dynamic_cost_small", group=_G, datasets=_D,
            statement="At batch 8, one dynamic-shape engine (the eager module serving every "
            "resolution) loses at most 10 % of the img/s of the CUDA-graph engine built for "
            "each resolution (the worst width and resolution)",
            fact="resolutions.dynamic_cost_max_pct", scope="dynamic=eager, batch=8",
            op="<=", threshold=10.0, partly=25.0, unit="%",
        ),
        Rule(
            id="resolutions_large_inputs_fill_gpu", group=_G, datasets=_D,
            statement="At batch 8, the fixed-shape engines process at least as many megapixels "
            "per second at the largest input as at the smallest (median over widths)",
            fact="resolutions.mpix_largest_over_smallest", scope="batch=8",
            op=">=", threshold=1.0, unit="x",
        ),
        Rule(
            id="resolutions_nearest_engine_pays", group=_G, datasets=_D,
            statement="At batch 8, serving each frame on the nearest fixed engine rather than "
            "on the largest one runs at least 1.5x the img/s (the least gain over widths and "
            "frames)",
            fact="resolutions.nearest_over_largest_engine", scope="batch=8",
            op=">=", threshold=1.5, unit="x",
        ),
    ),
    FACT_KEYS,
    _D,
)  # fmt: skip

"""The rows of a bench table (``yolo_sm.collect.bench``, kind ``bench``) every analysis of it
selects the same way: the variants' names, the rows that ran, the model-only engines, and the
scope label of a per-(width, batch) fact."""

from __future__ import annotations

from yolo_sm.contract.vocab import PIPELINE_MODES

#: the variant every engine of a unit is held against
BASELINE = "eager/fp16/nhwc"
PREDICT = "ultralytics_predict"
#: the prefix of pipeline variants (``pipeline/<engine>[/<mode>]/s<streams>``)
PIPELINE = "pipeline/"
EIGHT_BIT = ("fp8", "int8")


def pipeline_engine(variant: str) -> str:
    """The engine variant a pipeline variant wraps: ``pipeline/compile/fp16/nhwc/graph/s3`` ->
    ``compile/fp16/nhwc``."""
    parts = variant.removeprefix(PIPELINE).split("/")[:-1]  # the streams last
    return "/".join(parts[:-1] if parts and parts[-1] in PIPELINE_MODES else parts)


def ok_rows(df):
    """The rows of a measured table (a bench's, a sweep's) whose ``status`` is ``ok``: those
    that ran (all rows of a table without a status)."""
    return df[df["status"] == "ok"] if "status" in df else df


def engines(bench, baseline: bool = False):
    """ok model-only rows (without the baseline unless asked)."""
    e = ok_rows(bench)
    e = e[e["scope"] == "model_only"]
    return e if baseline else e[e["variant"] != BASELINE]


def variant_order(bench) -> list[str]:
    return list(dict.fromkeys(bench["variant"]))


def scope(width: float, batch: int) -> str:
    """The scope of a per-(width, batch) fact: ``"width=0.5, batch=16"``."""
    return f"width={float(width):g}, batch={int(batch)}"

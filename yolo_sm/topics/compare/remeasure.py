"""Re-measures: the points two sweep tables share, their new / first img/s, and a summary per
kind of point.

Pure tables: :func:`within_tolerance` flags a point whose ratio is within :data:`TOLERANCE`
(the column ``within_10pct``), host-bound points compare through a same-process reference
(:mod:`yolo_sm.analyse.regress`), :func:`launch_bound` marks eager points at small batch; whether
the figures repeat is decided by the rules of :mod:`yolo_sm.topics.batch.rules`, which read
the largest deviation (:func:`yolo_sm.topics.batch.analyse.pool_facts`) against the same tolerance.
"""

from __future__ import annotations

import math

from yolo_sm.analyse.hostbound import (  # noqa: F401 - shared names, re-exported
    HOST_BOUND_MIN_LAUNCHES,
    LAUNCH_BOUND_MAX_BATCH,
    TOLERANCE,
    host_bound,
    host_bound_rule,
    launch_bound,
    within_tolerance,
)
from yolo_sm.analyse.regress import repeat_points
from yolo_sm.contract.schema import KEY_COLUMNS


def compare(shipped, again):
    """The points two sweep tables share (same :data:`yolo_sm.contract.schema.KEY_COLUMNS`,
    ``ok`` in both), one row each: keys, ``shipped_img_per_s``, ``new_img_per_s``, ``ratio``,
    ``within_10pct``, ``host_bound``, ``basis``, ``gpu_busy_ratio``, ``rule_metrics``,
    ``launch_bound`` and both dates. ``again`` is a later measurement of the same points (e.g.
    the fp16 NHWC rows of ``sweep_bf16_nhwc`` against ``sweep_fp16_nhwc``), so every shared
    point is a re-measure.

    ``ratio`` is new / shipped img/s, except for host-bound points
    (:func:`yolo_sm.analyse.hostbound.host_bound` in either table), whose img/s is never
    compared across runs as it is: theirs is new / shipped of each run's ratio to a reference
    measured in the same process (``basis``, see :mod:`yolo_sm.analyse.regress`; NaN without
    one), reported only. ``within_10pct`` follows the gate of :mod:`yolo_sm.analyse.regress`:
    img/s, GPU busy time and launches per forward where both tables carry them for a GPU-bound
    point; the last two only for a host-bound one (None where neither table has them)."""

    keys = [c for c in KEY_COLUMNS if c in shipped and c in again]
    cols = [*keys, "img_per_s", "prov_date_utc"]
    a = shipped[shipped.status == "ok"][cols]
    b = again[again.status == "ok"][cols]
    m = a.merge(b, on=keys, suffixes=("_shipped", "_new"))  # pandas joins missing keys too
    if m.empty:
        m = m.assign(
            host_bound=False, img_per_s_basis="", img_per_s_change=m.img_per_s_new,
            within=None, gpu_busy_ratio=math.nan, gated_metrics="",
        )  # fmt: skip
        return _table(m, keys)
    per = repeat_points(shipped, again, keys=keys).rename(
        columns={"gpu_busy_change": "gpu_busy_ratio"}
    )
    cols = [*keys, "host_bound", "img_per_s_basis", "img_per_s_change", "within",
            "gpu_busy_ratio", "gated_metrics"]  # fmt: skip
    return _table(m.merge(per[cols], on=keys, how="left"), keys)


def _table(m, keys):
    import pandas as pd

    return m[keys].assign(
        shipped_img_per_s=m.img_per_s_shipped,
        new_img_per_s=m.img_per_s_new,
        ratio=m.img_per_s_change,
        within_10pct=pd.Series(m.within, index=m.index, dtype="object"),
        host_bound=m.host_bound.astype(bool),
        basis=m.img_per_s_basis,
        gpu_busy_ratio=m.gpu_busy_ratio.astype(float),
        rule_metrics=m.gated_metrics,
        launch_bound=launch_bound(m.backend, m.batch),
        shipped_date_utc=m.prov_date_utc_shipped,
        new_date_utc=m.prov_date_utc_new,
    )


def by_kind(cmp):
    """:func:`compare` (or ``yolo-sm remeasure``) rows summarised per backend and launch-bound or
    not: points, how many within 10 %, and the ratio's min / median / max."""
    return (
        cmp.groupby(["backend", "launch_bound"])
        .agg(
            points=("ratio", "size"),
            within_10pct=("within_10pct", lambda w: int((w == True).sum())),  # noqa: E712
            ratio_min=("ratio", "min"),
            ratio_median=("ratio", "median"),
            ratio_max=("ratio", "max"),
        )
        .reset_index()
    )

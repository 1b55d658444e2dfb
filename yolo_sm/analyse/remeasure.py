"""Re-measures: the points two sweep tables share, their new / first img/s, and a summary per
kind of point.

Pure tables: :func:`within_tolerance` flags a point whose ratio is within :data:`TOLERANCE`
(the column ``within_10pct``), :func:`launch_bound` marks eager points at small batch; whether
the figures repeat is decided by the rules of :mod:`yolo_sm.report.findings.batch`, which read
the largest deviation (:func:`yolo_sm.analyse.batch.pool_facts`) against the same tolerance.
"""

from __future__ import annotations

from yolo_sm.contract.schema import KEY_COLUMNS
from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE

TOLERANCE = 0.10  # a re-measure "repeats" within 10 % of the first
LAUNCH_BOUND_MAX_BATCH = 8  # eager up to this batch: the host's launches set the pace
HOST_BOUND_MIN_LAUNCHES = 2  # a graph replay and its input copy: the host cannot decide more


def within_tolerance(ratio):
    """Whether new / shipped is within :data:`TOLERANCE` (a number or a Series)."""
    return abs(ratio - 1) <= TOLERANCE


def launch_bound(backend, batch):
    """An eager point at batch <= :data:`LAUNCH_BOUND_MAX_BATCH`: its pace is the host's kernel
    launches (a value or a Series each)."""
    return (backend == "eager") & (batch <= LAUNCH_BOUND_MAX_BATCH)


def host_bound_rule(gpu_busy_fraction, launches_per_forward):
    """Host-bound: the GPU idle for more than :data:`HOST_BOUND_IDLE_SHARE` of the forward and
    more than :data:`HOST_BOUND_MIN_LAUNCHES` launches per forward (a CUDA graph's replay is one
    launch, with at most one copy of the input into its static buffer: its idle time is the
    gaps between the graph's own kernels). Values or Series; NaN inputs give False."""
    return (1 - gpu_busy_fraction > HOST_BOUND_IDLE_SHARE) & (
        launches_per_forward > HOST_BOUND_MIN_LAUNCHES
    )


def host_bound(df):
    """Per row of a sweep (or bench) table, whether the point is host-bound: the measured
    ``host_bound`` column where the row has it; where the table or the row lacks it (tables
    measured before it was recorded), the old heuristic :func:`launch_bound` (eager at batch
    <= :data:`LAUNCH_BOUND_MAX_BATCH`, on a GPU: on a CPU the host is the device). A boolean
    Series on ``df``'s index."""
    import pandas as pd

    guess = pd.Series(launch_bound(df["backend"], df["batch"]), index=df.index).astype(bool)
    if "device" in df:
        guess &= df["device"].astype(str).str.startswith("cuda").to_numpy()
    if "host_bound" not in df:
        return guess
    measured = df["host_bound"].astype("boolean")
    return measured.fillna(guess).astype(bool)


def compare(shipped, again):
    """The points two sweep tables share (same :data:`yolo_sm.contract.schema.KEY_COLUMNS`,
    ``ok`` in both), one row each: keys, ``shipped_img_per_s``, ``new_img_per_s``, ``ratio``
    (new / shipped), ``within_10pct``, ``launch_bound`` and both dates. ``again`` is a later
    measurement of the same points (e.g. the fp16 NHWC rows of ``sweep_bf16_nhwc`` against
    ``sweep_fp16_nhwc``), so every shared point is a re-measure."""

    keys = [c for c in KEY_COLUMNS if c in shipped and c in again]
    cols = [*keys, "img_per_s", "prov_date_utc"]
    a = shipped[shipped.status == "ok"][cols]
    b = again[again.status == "ok"][cols]
    m = a.merge(b, on=keys, suffixes=("_shipped", "_new"))  # pandas joins missing keys too
    ratio = m.img_per_s_new / m.img_per_s_shipped
    return m[keys].assign(
        shipped_img_per_s=m.img_per_s_shipped,
        new_img_per_s=m.img_per_s_new,
        ratio=ratio,
        within_10pct=within_tolerance(ratio),
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
            within_10pct=("within_10pct", "sum"),
            ratio_min=("ratio", "min"),
            ratio_median=("ratio", "median"),
            ratio_max=("ratio", "max"),
        )
        .reset_index()
    )

"""remeasure: split from collect.remeasure."""

from __future__ import annotations

from yolo_sm.contract.schema import KEY_COLUMNS

TOLERANCE = 0.10  # the "within 10 %"


def within_tolerance(ratio):
    """Whether new / shipped is within :data:`TOLERANCE` (a number or a Series)."""
    return abs(ratio - 1) <= TOLERANCE


def launch_bound(backend, batch):
    """An eager point at batch <= 8: its pace is the host's kernel launches (a value or a
    Series each)."""
    return (backend == "eager") & (batch <= 8)


def compare(shipped, again):
    """The points two sweep tables share (same :data:`yolo_sm.collect.sweep.KEY_COLUMNS`, ``ok`` in
    both), as :func:`remeasure`'s comparison rows: ``again`` is a later measurement of the same
    points (e.g. the fp16 NHWC rows of ``h200/sweep_bf16_nhwc`` against
    ``h200/sweep_fp16_nhwc``), so every shared point is a re-measure, not only five."""

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
    """:func:`compare` (or :func:`remeasure`) rows summarised per backend and launch-bound or
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

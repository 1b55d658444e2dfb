"""yolo_sm.analyse.remeasure: the points two sweep tables share, compared (CPU only)."""

from yolo_sm.analyse import remeasure as remeasure_tables
from yolo_sm.contract import datasets
from yolo_sm.report import remeasure_plots


def test_within_tolerance_and_launch_bound():
    assert remeasure_tables.within_tolerance(1.09) and not remeasure_tables.within_tolerance(1.11)
    assert remeasure_tables.launch_bound("eager", 8) and not remeasure_tables.launch_bound(
        "eager", 16
    )
    assert not remeasure_tables.launch_bound("cudagraph", 1)


def test_compare_two_tables_of_the_same_points():
    a = datasets.load("h200/sweep_fp16_nhwc")
    b = a.copy()
    b["img_per_s"] = b.img_per_s * (b.batch.map({1: 0.5}).fillna(1.05))  # batch 1 halves
    b["prov_date_utc"] = "2026-11-30T18:30:00+00:00"
    b.loc[b.index[0], "status"] = "error"  # a failed point in the second table: not compared
    c = remeasure_tables.compare(a, b)
    assert len(c) == int((a.status == "ok").sum()) - 1
    assert (c.launch_bound == ((c.backend == "eager") & (c.batch <= 8))).all()
    # the shipped table has no measured host-bound column: eager at batch <= 8 on a GPU is
    # host-bound, compared over its CUDA graph of the same run, which moved alike
    assert (c.host_bound == c.launch_bound).all()
    hb, rest = c[c.host_bound & (c.basis == "same_process")], c[~c.host_bound]
    assert len(hb) >= int(c.host_bound.sum()) - 1  # the failed point may be one's reference
    assert (hb.ratio.round(6) == 1.0).all() and hb.within_10pct.all()
    assert rest.ratio.round(6).isin([0.5, 1.05]).all() and (rest.basis == "absolute").all()
    assert (rest.within_10pct == (rest.batch != 1)).all()
    k = remeasure_tables.by_kind(c).set_index(["backend", "launch_bound"])
    assert k.points.sum() == len(c)
    graph = c[c.backend == "cudagraph"]
    assert k.loc[("cudagraph", False), "within_10pct"] == int((graph.batch != 1).sum())
    assert (c.shipped_img_per_s > 0).all() and (c.new_img_per_s > 0).all()
    assert k.loc[("eager", True), "points"] == int(((c.backend == "eager") & (c.batch <= 8)).sum())
    assert (k.ratio_min <= k.ratio_median).all() and (k.ratio_median <= k.ratio_max).all()
    assert len(remeasure_plots.plot_compare(c).data) >= 2
    # other points (another precision) share nothing
    none = remeasure_tables.compare(a, b.assign(precision="bf16"))
    assert none.empty


def test_the_shipped_fp16_grid_measured_again():
    a = datasets.load("h200/sweep_fp16_nhwc")
    b = datasets.load("h200/sweep_bf16_nhwc")
    c = remeasure_tables.compare(a, b[b.precision == "fp16"])
    assert len(c) == len(a)  # every point of the grid was measured again
    assert c[c.backend == "cudagraph"].within_10pct.all()

"""yolo_sm.topics.compare.remeasure: the points two sweep tables share, compared (CPU only)."""

from yolo_sm.contract import datasets
from yolo_sm.topics.compare import remeasure as remeasure_tables
from yolo_sm.topics.compare import remeasure_report as remeasure_plots


def test_within_tolerance_and_launch_bound():
    assert remeasure_tables.within_tolerance(1.09) and not remeasure_tables.within_tolerance(1.11)
    assert remeasure_tables.launch_bound("eager", 8) and not remeasure_tables.launch_bound(
        "eager", 16
    )
    assert not remeasure_tables.launch_bound("cudagraph", 1)


HOST_COLUMNS = ["host_bound", "gpu_busy_ms", "gpu_busy_fraction", "launches_per_forward",
                "kernels_per_forward", "host_cpu_ms", "host_launch_us"]  # fmt: skip


def test_compare_two_tables_of_the_same_points():
    a = datasets.load("h200/sweep_fp16_nhwc").drop(columns=HOST_COLUMNS, errors="ignore")
    b = a.copy()
    b["img_per_s"] = b.img_per_s * (b.batch.map({1: 0.5}).fillna(1.05))  # batch 1 halves
    b["prov_date_utc"] = "2026-11-30T18:30:00+00:00"
    b.loc[b.index[0], "status"] = "error"  # a failed point in the second table: not compared
    c = remeasure_tables.compare(a, b)
    assert len(c) == int((a.status == "ok").sum()) - 1
    assert (c.launch_bound == ((c.backend == "eager") & (c.batch <= 8))).all()
    # without a measured host-bound column: eager at batch <= 8 on a GPU is host-bound, its
    # img/s reported over its CUDA graph of the same run (which moved alike), nothing decides
    assert (c.host_bound == c.launch_bound).all()
    hb, rest = c[c.host_bound & (c.basis == "same_process")], c[~c.host_bound]
    assert len(hb) >= int(c.host_bound.sum()) - 1  # the failed point may be one's reference
    assert (hb.ratio.round(6) == 1.0).all() and c[c.host_bound].within_10pct.isna().all()
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


def test_host_bound_points_are_decided_by_their_gpu_work_where_both_tables_measured_it():
    a = datasets.load("h200/sweep_fp16_nhwc")
    assert a.host_bound.any() and a.gpu_busy_ms.notna().all()
    hb = a.host_bound.astype(bool)
    # another host: host-bound points at a third of the pace, the GPU's work 5 % longer
    b = a.assign(
        img_per_s=a.img_per_s.where(~hb, a.img_per_s / 3), gpu_busy_ms=a.gpu_busy_ms * 1.05
    )
    c = remeasure_tables.compare(a, b).set_index(["width", "backend", "batch"])
    host = c[c.host_bound]
    assert (
        len(host) == int(hb.sum())
        and (
            host.rule_metrics.map(lambda m: set(m.split(",")))
            == {"launches_per_forward", "gpu_busy_ms"}
        ).all()
    )
    assert host.within_10pct.all() and (host.gpu_busy_ratio.round(6) == 1.05).all()
    # the GPU's work 20 % longer: every point leaves the tolerance, host-bound ones included
    worse = remeasure_tables.compare(a, b.assign(gpu_busy_ms=a.gpu_busy_ms * 1.2))
    assert not worse.within_10pct.astype(bool).any()


def test_the_shipped_fp16_grid_measured_again():
    a = datasets.load("h200/sweep_fp16_nhwc")
    b = datasets.load("h200/sweep_bf16_nhwc")
    c = remeasure_tables.compare(a, b[b.precision == "fp16"])
    assert len(c) == len(a)  # every point of the grid was measured again
    assert c[c.backend == "cudagraph"].within_10pct.all()

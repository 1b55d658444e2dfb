"""The recommendation table, the two-numbers tables and the table formatter: numbers checked on
small in-memory tables and on the shipped H200 root."""

import math

import pandas as pd
import pytest

from yolo_sm.contract.datasets import open_root
from yolo_sm.report import tables
from yolo_sm.topics.batch import agreement
from yolo_sm.topics.deploy import recommend as fast_recommend


@pytest.fixture(scope="module")
def h200():
    return open_root("h200")


def _bench_rows(rows):
    cols = ["width", "batch", "variant", "img_per_s", "median_ms", "build_s", "vs_baseline"]
    d = pd.DataFrame(rows, columns=cols)
    return d.assign(status="ok", scope="model_only", iqr_ms=0.1, peak_mem_bytes=1e9)


def test_recommendation_takes_the_faster_build_among_near_ties():
    b = _bench_rows(
        [
            (1.0, 64, "eager/fp16/nhwc", 1000.0, 64.0, 2.0, 1.0),
            (1.0, 64, "cudagraph/fp16/nhwc", 1010.0, 63.0, 1.0, 1.01),
            (1.0, 64, "compile/fp16/nhwc", 1500.0, 42.0, 20.0, 1.5),
            (1.0, 64, "compile:reduce-overhead/fp16/nhwc", 1480.0, 43.0, 5.0, 1.48),
            (1.0, 1, "eager/fp16/nhwc", 200.0, 5.0, 2.0, 1.0),
            (1.0, 1, "cudagraph/fp16/nhwc", 700.0, 1.4, 0.2, 3.5),
        ]
    )
    r = fast_recommend.recommend(b).set_index("batch")
    assert r.loc[64, "engine"] == "compile:reduce-overhead/fp16/nhwc"  # within 5 %, builds faster
    assert fast_recommend.recommend(b, near=0.0).set_index("batch").loc[64, "engine"] == (
        "compile/fp16/nhwc"
    )
    assert r.loc[1, "engine"] == "cudagraph/fp16/nhwc" and r.loc[1, "vs_cudagraph"] == 1.0
    assert r.loc[64, "vs_cudagraph"] == pytest.approx(1480 / 1010)
    assert "static shapes" in r.loc[1, "caveats"]
    by = fast_recommend.recommend_by_batch(fast_recommend.recommend(b))
    assert list(by.batch) == [1, 64] and (by.widths_picked == "1 of 1").all()


def test_workload_from_the_h200_bench(h200):
    bench = h200.load("bench_fast_engines")
    w = fast_recommend.workload(bench)
    assert w["max_candidates_per_frame"] == bench.candidates_per_frame.max()
    assert w["max_boxes_per_frame"] == bench.boxes_per_frame.max()
    assert fast_recommend.workload(bench.drop(columns="candidates_per_frame")) == {}


def test_graph_speedup_names_the_latency_that_moved():
    sweep = pd.DataFrame(
        {"status": "ok", "batch": 1, "precision": "fp16", "layout": "nhwc", "width": [1.0, 1.0],
         "backend": ["eager", "cudagraph"], "median_ms": [4.0, 1.0]}
    )  # fmt: skip
    bench = pd.DataFrame(
        {"status": "ok", "batch": 1, "width": [1.0, 1.0],
         "variant": ["eager/fp16/nhwc", "cudagraph/fp16/nhwc"], "median_ms": [6.0, 1.0]}
    )  # fmt: skip
    t = agreement.graph_speedup_sweep_vs_bench(sweep, bench).iloc[0]
    assert t.sweep_speedup == 4.0 and t.bench_speedup == 6.0
    assert t.eager_ratio == 1.5 and t.graph_ratio == 1.0 and t.moved == "eager"


def test_table_formatting():
    assert tables.number(5898240000) == "5,898,240,000"
    assert tables.number(18.75) == "18.75" and tables.number(1234.5) == "1,234"
    assert tables.number(math.nan) == ""
    assert tables.si(1.40198e11, "B") == "140 GB"
    assert tables.kib(231424) == "226 KiB"
    assert tables.header("median_ms") == "median (ms)" and tables.header("img_per_s") == "img/s"
    assert tables.header("peak_mem_bytes") == "peak memory"
    html = tables.show(pd.DataFrame({"time_share": [0.5], "peak_mem_bytes": [2e9]})).to_html()
    assert "50.0 %" in html and "2 GB" in html and "time share" in html

"""The recommendation table, the two-numbers tables and the table formatter: numbers checked on
small in-memory tables and on the shipped H200 root."""

import math

import pandas as pd
import pytest

from yolo_sm.contract.datasets import open_root
from yolo_sm.report import tables
from yolo_sm.topics.batch import analyse as agreement


@pytest.fixture(scope="module")
def h200():
    return open_root("h200")


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

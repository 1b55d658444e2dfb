"""Notebook 16's facts and rules on monitor tables built in the test: each rule's verdict flips
when its fact crosses the threshold; the figures follow the project's vocabulary; and the
notebook renders from a root whose monitor_bench a fake-NVML monitor recorded."""

import math
import time

import pandas as pd
import pytest

from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, evaluate, topic_rules
from yolo_sm.topics.monitor import analyse as am

RULES = topic_rules("monitor")

UNITS = {
    am.OCCUPANCY: "ratio",
    am.SM_ACTIVE: "ratio",
    am.TENSOR: "ratio",
    am.DRAM: "ratio",
    am.GPU_UTIL: "%",
    am.FB_USED: "MiB",
    am.SM_CLOCK: "MHz",
    am.POWER: "W",
}


def table(active=0.9, occupancy=0.3, util=100.0, power_busy=400.0, power_idle=100.0, n=6):
    """A monitor table: ``n`` idle samples, ``n`` busy ones (an engine labelled), ``n`` idle."""
    rows = []
    for i in range(3 * n):
        busy = n <= i < 2 * n
        values = {
            am.OCCUPANCY: occupancy if busy else 0.0,
            am.SM_ACTIVE: active if busy else 0.0,
            am.TENSOR: 0.2 if busy else 0.0,
            am.DRAM: 0.1 if busy else 0.0,
            am.GPU_UTIL: util if busy else 0.0,
            am.FB_USED: 4000.0 if busy else 500.0,
            am.SM_CLOCK: 1980.0 if busy else 345.0,
            am.POWER: power_busy if busy else power_idle,
        }
        for metric, v in values.items():
            rows.append(
                {
                    "t_s": 1.0 + i,
                    "window_s": 1.0,
                    "metric": metric,
                    "value": v,
                    "unit": UNITS[metric],
                    "gpu_index": 0,
                    "gpu_uuid": "GPU-x",
                    "workload": "bench" if busy else "",
                    "model": "yolov8:1" if busy else "",
                    "engine": ("eager/fp16/nhwc" if i < 1.5 * n else "cudagraph/fp16/nhwc")
                    if busy
                    else "",
                    "batch": 16.0 if busy else math.nan,
                }
            )
    return pd.DataFrame(rows)


def verdict(df, rule_id):
    v = evaluate(RULES, facts_of(df), "t").set_index("id")
    return v.verdict[rule_id], v.measured[rule_id]


@pytest.mark.parametrize(
    "rule_id, holds, fails",
    [
        ("monitor_bench_fills_the_sms", {"active": 0.8}, {"active": 0.1}),
        (
            "monitor_active_is_not_occupancy",
            {"active": 0.9, "occupancy": 0.3},
            {"active": 0.9, "occupancy": 0.85},
        ),
        (
            "monitor_gpu_util_overstates",
            {"active": 0.6, "util": 100.0},
            {"active": 0.99, "util": 97.0},
        ),
        ("monitor_power_follows_the_bench", {"power_busy": 400.0}, {"power_busy": 105.0}),
    ],
)
def test_each_rule_flips_with_its_fact(rule_id, holds, fails):
    v_hold, m_hold = verdict(table(**holds), rule_id)
    v_fail, m_fail = verdict(table(**fails), rule_id)
    assert v_hold == HOLDS and v_fail == FAILS, (m_hold, m_fail)


def facts_of(df):
    from tests.test_audit_topics import Root

    return am.facts(Root(monitor_bench=df))


def test_facts_read_the_busy_and_idle_samples():
    f = facts_of(table(active=0.8, occupancy=0.2, util=95.0, power_busy=300.0)).set_index("key")
    assert f.value["monitor_sm_active_busy"] == pytest.approx(0.8)
    assert f.value["monitor_occupancy_over_active_busy"] == pytest.approx(0.25)
    assert f.value["monitor_gpu_util_over_sm_active_pp"] == pytest.approx(15.0)
    assert f.value["monitor_power_busy_over_idle"] == pytest.approx(3.0)
    per = am.per_engine(table())
    assert per.engine.tolist() == ["idle", "eager/fp16/nhwc", "cudagraph/fp16/nhwc"]
    assert per.samples.tolist() == [12, 3, 3]


def test_gpm_relation_keeps_occupancy_within_activity():
    from yolo_sm.contract.datasets import open_root

    root = open_root("h200")
    if not root.has(am.GPM_BATCH):
        pytest.skip("the H200 root holds no GPM timeline")
    gpm = root.load(am.GPM_BATCH)
    rel = am.gpm_relation(gpm)
    assert (rel.sm_occupancy <= rel.sm_active + 1e-6).all()  # occupancy counts within activity
    assert rel.occupancy_over_active.between(0, 1).any()


def test_missing_dataset_leaves_the_facts_out(tmp_path, make_root):
    from yolo_sm.contract.datasets import open_root

    root = open_root(make_root("empty", []))
    assert am.facts(root).empty
    from yolo_sm.report.catalog import topic_verdicts

    v = topic_verdicts("monitor", root)
    assert set(v.verdict) == {NOT_TESTED}


def test_figures_follow_the_vocabulary():
    pytest.importorskip("plotly")
    from tests.figure_checks import problems
    from yolo_sm.topics.monitor import report as monitor_plots

    fig = monitor_plots.plot_series(table())
    assert not problems(fig)
    names = {t.name for t in fig.data}
    assert names == {"idle", "eager/fp16/nhwc", "cudagraph/fp16/nhwc"}
    assert len(fig.data) == 3 * len(am.FIELD_ORDER)


@pytest.mark.notebooks
def test_notebook_renders_a_recorded_monitor_root(tmp_path, make_root):
    pytest.importorskip("prometheus_client")
    from tests.fixtures.fake_nvml import MonitorNVML
    from tests.test_notebooks import NOTEBOOKS, _executes_and_renders
    from yolo_sm.topics.monitor.collect import Monitor
    from yolo_sm.topics.monitor.collect_exporter import write_record

    root = make_root("h200", [am.GPM_BATCH])
    mon = Monitor(0, 0.2, nvml=MonitorNVML(), hostname="h", ncu_check=lambda: False)
    with mon:
        time.sleep(0.5)
        mon.mark(workload="bench", engine="eager/fp16/nhwc", batch=16)
        time.sleep(0.6)
        mon.mark(workload=None, engine=None, batch=None)
        time.sleep(0.5)
    write_record(mon, root / "monitor_bench.parquet", dataset="monitor_bench")
    path = next(p for p in NOTEBOOKS if p.name.startswith("16_"))
    nb, html = _executes_and_renders(path, root)
    assert "eager/fp16/nhwc" in html and "SM occupancy (ratio of warp slots)" in html
    assert html.count("Plotly.newPlot") >= 2  # the series and the GPM relation

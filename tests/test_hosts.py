"""analyse.hosts and findings.hosts: the host's share of a forward from a sweep's host columns,
on tiny tables, and each rule moved across its threshold."""

import pandas as pd
import pytest

from yolo_sm.report.rules import FAILS, HOLDS, PARTLY, evaluate
from yolo_sm.topics.launches import hosts
from yolo_sm.topics.launches import rules as findings


def _row(backend, width, batch, median, busy, cpu, launches, host_bound):
    return dict(
        family="yolov8", width=width, precision="fp16", layout="nhwc", backend=backend,
        batch=batch, status="ok", median_ms=median, gpu_busy_ms=busy, host_cpu_ms=cpu,
        launches_per_forward=launches, host_bound=host_bound, host_launch_us=9.0,
        prov_cpu_model="Some CPU", prov_cpu_count=16,
    )  # fmt: skip


def _sweep(cpu_b1=4.0, hb_w2=True, graph_hb=False):
    return pd.DataFrame(
        [
            _row("eager", 0.5, 1, 4.0, 1.0, cpu_b1, 236, True),
            _row("eager", 2.0, 1, 4.5, 2.0, cpu_b1, 242, hb_w2),
            _row("eager", 0.5, 64, 16.0, 15.8, 11.0, 288, False),
            _row("eager", 2.0, 64, 80.0, 80.0, 26.0, 293, False),
            _row("cudagraph", 0.5, 1, 1.0, 0.95, 0.1, 1, graph_hb),
            _row("cudagraph", 2.0, 64, 79.0, 79.0, 3.0, 1, False),
        ]
    )


class _Root:
    name = "r"

    def __init__(self, sweep):
        self.sweep = sweep

    def has(self, name):
        return name == hosts.SWEEP and self.sweep is not None

    def load(self, name):
        return self.sweep


def _verdicts(**kw):
    return evaluate(findings.RULES, hosts.facts(_Root(_sweep(**kw)))).set_index("id").verdict


def test_host_table_derives_idle_time_shares_and_launch_cost():
    t = hosts.host_table(_sweep())
    e1 = t[(t.backend == "eager") & (t.batch == 1) & (t.width == 0.5)].iloc[0]
    assert e1.gpu_idle_ms == pytest.approx(3.0) and e1.gpu_busy_pct == pytest.approx(25.0)
    assert e1.cpu_share_pct == pytest.approx(100.0)
    assert e1.us_per_launch == pytest.approx(4000 / 236) and e1.cpu_model == "Some CPU"
    assert list(hosts.small_batch_view(t).columns) == list(hosts.VIEW_COLUMNS)
    assert len(hosts.small_batch_view(t)) == 2 and hosts.cpu_of(t) == "Some CPU (16 logical CPUs)"
    edge = hosts.host_bound_edge(t).set_index("width")
    assert edge.loc[0.5, "largest_host_bound_batch"] == 1
    assert edge.loc[0.5, "smallest_gpu_bound_batch"] == 64
    # a table measured before the host columns: nothing, and no facts
    old = _sweep().drop(columns=["gpu_busy_ms", "host_cpu_ms"])
    assert hosts.host_table(old).empty and hosts.facts(_Root(old)).empty
    assert hosts.facts(_Root(None)).empty


def test_rules_flip():
    v = _verdicts()
    assert v["hosts_eager_small_batch_host_bound"] == HOLDS
    assert v["hosts_eager_small_batch_cpu_time"] == HOLDS
    assert v["hosts_graph_never_host_bound"] == HOLDS
    assert _verdicts(hb_w2=False)["hosts_eager_small_batch_host_bound"] == PARTLY
    assert _verdicts(cpu_b1=3.4)["hosts_eager_small_batch_cpu_time"] == PARTLY  # 76-85 %
    assert _verdicts(cpu_b1=2.0)["hosts_eager_small_batch_cpu_time"] == FAILS
    assert _verdicts(graph_hb=True)["hosts_graph_never_host_bound"] == FAILS


def test_the_shipped_sweep_carries_the_host_columns():
    from yolo_sm.contract.datasets import open_root

    f = hosts.facts(open_root("h200")).set_index("key").value
    assert 0 <= f[hosts.PREFIX + "eager_small_host_bound_share_pct"] <= 100
    assert f[hosts.PREFIX + "eager_small_launches_per_forward"] > 100  # an eager YOLOv8

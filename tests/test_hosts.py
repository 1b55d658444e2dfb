"""The host facts of topics.launches.analyse and their rules: the host's share of a forward from
a sweep's host columns, on tiny tables, and each rule moved across its threshold."""

import pandas as pd
import pytest

from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY, evaluate, topic_rules
from yolo_sm.topics.launches import analyse as hosts


def _row(backend, width, batch, median, busy, cpu, launches, host_bound):
    return dict(
        family="yolov8", width=width, precision="fp16", layout="nhwc", backend=backend,
        batch=batch, status="ok", median_ms=median, mean_ms=median, gpu_busy_ms=busy,
        host_cpu_ms=cpu, launches_per_forward=launches, host_bound=host_bound,
        prov_cpu_model="Some CPU", prov_cpu_count=16,
    )  # fmt: skip


def _sweep(cpu_b1=4.0, hb_w2=True, graph_busy=0.95):
    return pd.DataFrame(
        [
            _row("eager", 0.5, 1, 4.0, 1.0, cpu_b1, 236, True),
            _row("eager", 2.0, 1, 4.0, 2.0, cpu_b1, 242, hb_w2),
            _row("eager", 0.5, 64, 16.0, 15.8, 11.0, 288, False),
            _row("eager", 2.0, 64, 80.0, 80.0, 26.0, 293, False),
            _row("cudagraph", 0.5, 1, 1.0, graph_busy, 0.1, 1, False),
            _row("cudagraph", 2.0, 64, 79.0, 80.0, 3.0, 1, False),
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


def _verdicts(sweep):
    return evaluate(topic_rules("launches"), hosts.facts(_Root(sweep))).set_index("id").verdict


def test_host_table_derives_shares_ratios_and_launch_cost():
    t = hosts.host_table(_sweep())
    e1 = t[(t.backend == "eager") & (t.batch == 1) & (t.width == 0.5)].iloc[0]
    assert e1.gpu_busy_pct == pytest.approx(25.0) and e1.cpu_over_forward == pytest.approx(1.0)
    assert e1.us_per_launch == pytest.approx(4000 / 236) and e1.cpu_model == "Some CPU"
    assert t.gpu_busy_pct.max() == 100  # a busy time above the median forward: 100 %, no more
    assert list(hosts.small_batch_view(t).columns) == list(hosts.VIEW_COLUMNS)
    assert len(hosts.small_batch_view(t)) == 2 and hosts.cpu_of(t) == "Some CPU (16 logical CPUs)"
    edge = hosts.host_bound_edge(t).set_index("width")
    assert edge.loc[0.5, "largest_host_bound_batch"] == 1
    assert edge.loc[0.5, "smallest_gpu_bound_batch"] == 64
    # a table measured without the host columns: nothing, and no facts
    old = _sweep().drop(columns=["gpu_busy_ms", "host_cpu_ms"])
    assert hosts.host_table(old).empty and hosts.facts(_Root(old)).empty
    assert hosts.facts(_Root(None)).empty


def test_rules_flip():
    v = _verdicts(_sweep())
    assert (v[[r.id for r in topic_rules("launches") if r.id.startswith("hosts_")]] == HOLDS).all()
    assert _verdicts(_sweep(hb_w2=False))["hosts_eager_small_batch_host_bound"] == PARTLY
    assert _verdicts(_sweep(cpu_b1=3.2))["hosts_eager_small_batch_cpu_time"] == PARTLY  # 0.8x
    assert _verdicts(_sweep(cpu_b1=2.0))["hosts_eager_small_batch_cpu_time"] == FAILS
    assert _verdicts(_sweep(graph_busy=0.85))["hosts_graph_keeps_gpu_busy"] == PARTLY
    assert _verdicts(_sweep(graph_busy=0.5))["hosts_graph_keeps_gpu_busy"] == FAILS
    no_b1 = _sweep()[lambda d: d.batch != 1]  # no batch-1 point: not tested, never vacuous
    assert _verdicts(no_b1)["hosts_eager_small_batch_host_bound"] == NOT_TESTED

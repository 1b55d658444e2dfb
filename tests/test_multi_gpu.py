"""Collecting on several GPUs against one (yolo_sm.topics.batch.multi_gpu): wall time and scaling
from two task logs, per-GPU ratios of the same points, the tables' rows compared, and the
findings that flip with them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.manifest import register
from yolo_sm.contract.schema import COLLECT_TASKS
from yolo_sm.contract.store import write_atomic
from yolo_sm.report import catalog
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY, evaluate, topic_rules
from yolo_sm.topics.batch import multi_gpu
from yolo_sm.topics.batch import report as sections

PAIR_RULES = topic_rules("batch", "pair_rules.toml")

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "h200"
SWEEP = "sweep_fp16_nhwc"
UUIDS = ("GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd")


def _tasks(run_walls, workers, task_s, units=8) -> pd.DataFrame:
    """A task log: per run its wall seconds, ``units`` tasks of ``task_s`` each, spread over
    ``workers`` GPUs."""
    rows = []
    for i, wall in enumerate(run_walls):
        for u in range(units):
            rows.append(
                {"run": f"r{i}", "run_started_utc": "2026-01-01T00:00:00+00:00",
                 "run_wall_s": wall, "workers": workers, "step": "s", "unit": f"s:{i}:{u}",
                 "state": "done", "seconds": task_s, "cores": 4,
                 "gpu_uuid": UUIDS[u % workers], "gpu_index": u % workers, "host": "h",
                 "worker": f"w{u % workers}"}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_scaling_sums_a_resumed_roots_runs():
    multi = _tasks([100.0], 4, 45.0)
    single = _tasks([200.0, 150.0], 1, 40.0, units=4)  # one GPU, resumed once
    r = multi_gpu.runs(single)
    assert r.run.tolist() == ["r0", "r1"] and r.wall_s.tolist() == [200.0, 150.0]
    s = multi_gpu.scaling(multi, single).iloc[0]
    assert s.gpus == 4 and s.multi_wall_s == 100.0 and s.single_wall_s == 350.0
    assert s.speedup == pytest.approx(3.5) and s.efficiency == pytest.approx(0.875)
    assert s.busy_share == pytest.approx(8 * 45.0 / (4 * 100.0))
    assert multi_gpu.scaling(multi, single.iloc[:0]).empty


def _sweep_rows():
    keys = {"family": "yolov8", "scale": None, "depth": 0.33, "max_channels": 2048,
            "precision": "fp16", "layout": "nhwc", "backend": "cudagraph", "imgsz": 640,
            "compile_mode": None, "device": "cuda"}  # fmt: skip
    return pd.DataFrame(
        [
            {
                **keys,
                "width": w,
                "batch": b,
                "status": "ok",
                "img_per_s": 1000.0 * w * b,
                "host_bound": b == 1,
            }
            for w in (0.5, 1.0)
            for b in (1, 8, 64)
        ]  # fmt: skip
    )


def test_point_ratios_per_gpu_leave_host_bound_points_out():
    single = _sweep_rows()
    multi = single.assign(gpu_uuid=[UUIDS[i % 2] for i in range(6)], gpu_index=np.arange(6) % 2)
    multi.loc[multi.gpu_index == 1, "img_per_s"] *= 1.05  # GPU 1 measures 5 % faster
    r = multi_gpu.point_ratios(multi, single, "sweep")
    assert len(r) == 4  # the batch-1 points are host-bound
    spread = multi_gpu.gpu_spread(r).set_index("gpu_index")
    assert spread.loc[0, "median"] == pytest.approx(1.0)
    assert spread.loc[1, "median"] == pytest.approx(1.05) and spread.points.sum() == 4


def test_an_ncu_table_compares_each_configs_summed_kernel_time():
    single = pd.DataFrame({"config": ["a", "a", "b"], "kernel_name": ["k1", "k2", "k1"],
                           "duration_us": [10.0, 30.0, 20.0]})  # fmt: skip
    multi = single.assign(duration_us=[5.0, 15.0, 20.0], gpu_uuid=UUIDS[1], gpu_index=1)
    r = multi_gpu.point_ratios(multi, single, "ncu").set_index("config")
    assert r.ratio.to_dict() == {"a": 2.0, "b": 1.0}  # above 1: the multi run's GPU faster
    assert multi_gpu.key_match(multi, single, "ncu")["only_multi"] == 0
    longer = pd.concat([multi, multi.iloc[:1]], ignore_index=True)  # one more launch of k1 in a
    m = multi_gpu.key_match(longer, single, "ncu")
    assert m["only_multi"] == 1 and m["only_single"] == 0


def test_key_match_counts_rows_one_root_lacks_and_status_changes():
    single = _sweep_rows()
    multi = single.iloc[1:].copy()
    multi.loc[multi.index[0], "status"] = "oom"
    m = multi_gpu.key_match(multi, single, "sweep")
    assert m == {"rows_multi": 5, "rows_single": 6, "only_multi": 0, "only_single": 1,
                 "status_differs": 1}  # fmt: skip


def _root(path: Path, sweep: pd.DataFrame, tasks: pd.DataFrame | None):
    path.mkdir()
    write_atomic(sweep, path / f"{SWEEP}.parquet")
    register(path, SWEEP, f"{SWEEP}.parquet", "sweep", "a sweep", "yolo-sm collect")
    if tasks is not None:
        write_atomic(tasks, path / f"{COLLECT_TASKS}.parquet")
        register(path, COLLECT_TASKS, f"{COLLECT_TASKS}.parquet", COLLECT_TASKS, "tasks", "c")
    return open_root(str(path))


@pytest.fixture
def shipped_sweep():
    return pd.read_parquet(SHIPPED / f"{SWEEP}.parquet")


@pytest.mark.parametrize(
    "faster, wall, alike, scales",
    [(1.0, 60.0, HOLDS, HOLDS), (1.04, 75.0, PARTLY, PARTLY), (1.10, 150.0, FAILS, FAILS)],
)
def test_the_findings_flip_with_the_roots(tmp_path, shipped_sweep, faster, wall, alike, scales):
    """Two roots of the same shipped sweep: the multi-GPU one spread over 4 GPUs, GPU 3's
    points ``faster`` x, its wall time ``wall`` against one GPU's 200 s."""
    n = len(shipped_sweep)
    place = pd.DataFrame({"gpu_index": np.arange(n) % 4})
    place["gpu_uuid"] = place.gpu_index.map(lambda i: UUIDS[i])
    multi_sweep = pd.concat([shipped_sweep, place], axis=1)
    multi_sweep.loc[multi_sweep.gpu_index == 3, "img_per_s"] *= faster
    multi = _root(tmp_path / "multi", multi_sweep, _tasks([wall], 4, 0.9 * wall))
    single = _root(tmp_path / "single", shipped_sweep, _tasks([200.0], 1, 25.0))
    v = verdicts(multi, single).set_index("id")
    assert v.verdict["multi_gpu_alike"] == alike
    assert v.verdict["multi_gpu_scales"] == scales
    assert v.measured["multi_gpu_scales"] == pytest.approx(200.0 / wall / 4)
    assert v.verdict["multi_gpu_same_tables"] == HOLDS
    # the pair rules of the catalogue, in either order
    both = catalog.pair_verdict_table(single, multi).set_index("id")
    assert both.verdict["multi_gpu_alike"] == alike
    # a row the multi root lacks
    short = _root(tmp_path / "short", multi_sweep.iloc[1:], _tasks([wall], 4, 0.9 * wall))
    assert verdicts(short, single).set_index("id").verdict["multi_gpu_same_tables"] == FAILS


def verdicts(multi, single):
    return evaluate(PAIR_RULES, multi_gpu.pair_facts(multi, single))


def test_nothing_is_decided_without_a_run_on_two_gpus(tmp_path, shipped_sweep):
    one = _root(tmp_path / "one", shipped_sweep, _tasks([200.0], 1, 25.0))
    plain = _root(tmp_path / "plain", shipped_sweep, None)
    assert multi_gpu.facts(one, plain).empty and multi_gpu.facts(plain, one).empty
    assert verdicts(one, plain).verdict.eq(NOT_TESTED).all()
    for roots in ((None, one), (one, plain), (None, None)):  # one line, once
        (line,) = sections.multi_gpu_section(*roots)
        assert "MULTI_GPU" in line and len(line.splitlines()) == 1


def test_the_section_shows_tables_and_a_figure(tmp_path, shipped_sweep):
    place = pd.DataFrame({"gpu_index": np.arange(len(shipped_sweep)) % 2})
    place["gpu_uuid"] = place.gpu_index.map(lambda i: UUIDS[i])
    multi = _root(
        tmp_path / "m", pd.concat([shipped_sweep, place], axis=1), _tasks([120.0], 2, 100.0)
    )
    single = _root(tmp_path / "s", shipped_sweep, _tasks([200.0], 1, 25.0))
    out = sections.multi_gpu_section(multi, single)
    # scaling, runs, per-GPU spread and its figure, the tables' match, the verdicts
    assert len(out) == 6
    fig = out[3]
    assert {t.name for t in fig.data} == {SWEEP} and len(fig.data[0].y) > 0
    plain = _root(tmp_path / "p", shipped_sweep, None)  # a one-GPU root without a task log
    assert len(sections.multi_gpu_section(multi, plain)) == 4  # no scaling without its log


def test_rules_flip_on_their_facts():
    def verdict(key, value):
        facts = facts_table([fact(multi_gpu.PREFIX + key, value)])
        return evaluate(PAIR_RULES, facts).set_index("id").verdict

    assert verdict("scaling_efficiency", 0.81)["multi_gpu_scales"] == HOLDS
    assert verdict("scaling_efficiency", 0.59)["multi_gpu_scales"] == FAILS
    assert verdict("gpu_median_spread_pct", 2.9)["multi_gpu_alike"] == HOLDS
    assert verdict("table_mismatches", 1)["multi_gpu_same_tables"] == FAILS

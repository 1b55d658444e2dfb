"""Two models sharing one GPU: the timing math, kernel overlap, facts and rules on small
synthetic tables, the trace-to-engine mapping on a synthetic Chrome trace, the GPM sampler's
power column against a fake NVML, and the collector's CPU mode."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from yolo_sm.contract.errors import UserError
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY, evaluate, topic_rules
from yolo_sm.topics.sharing import analyse as sharing

RULES = topic_rules("sharing")

BIG = "1x16+0.25x1"
EQUAL = "0.5x16+0.5x16"


# ---- timing math ------------------------------------------------------------------------------


def test_window_rows_count_only_batches_inside_the_common_window():
    # engine a: 10 ms batches from 0 to 100 ms; engine b: 2 ms batches from 5 to 95 ms
    a = (np.arange(0, 100, 10.0), np.arange(10, 110, 10.0))
    b = (np.arange(5, 93, 2.0), np.arange(7, 95, 2.0))
    ra, rb = sharing.window_rows([a, b], [16, 1])
    # latest first start (b's, 5 ms) to earliest last end (b's, 93 ms)
    assert sharing.window([a, b]) == (5.0, 93.0)
    assert ra["window_s"] == rb["window_s"] == pytest.approx(0.088)
    # a's batches inside [5, 93]: starts 10..80 (ends 20..90): 8 batches
    assert ra["batches"] == 8 and ra["img_per_s"] == pytest.approx(8 * 16 / 0.088)
    assert rb["batches"] == 44 and rb["p50_ms"] == pytest.approx(2.0)
    assert ra["p99_ms"] == pytest.approx(10.0)
    alone = sharing.window_rows([a], [16], common=False)[0]
    assert alone["batches"] == 10 and alone["img_per_s"] == pytest.approx(160 / 0.1)


def test_latency_quantiles_follow_the_slow_batches():
    s = np.arange(100) * 3.0
    e = s + np.where(np.arange(100) >= 95, 3.0, 1.0)  # five slow batches of 3 ms
    (r,) = sharing.window_rows([(s, e)], [1], common=False)
    assert r["p50_ms"] == pytest.approx(1.0) and r["p99_ms"] == pytest.approx(3.0)
    assert r["mean_ms"] == pytest.approx(1.1)


def test_overlap_counts_the_union_of_the_other_engines_kernels():
    # other engine: [0, 4) and [3, 6) (overlapping: union [0, 6)) and [10, 12)
    ov = sharing.overlap_us([1, 5, 7, 11], [2, 11, 9, 20], [0, 3, 10], [4, 6, 12])
    assert list(ov) == [1.0, 2.0, 0.0, 1.0]
    assert list(sharing.overlap_us([1], [2], [], [])) == [0.0]


def test_kernel_classes_share_time_and_overlap_per_engine():
    k = pd.DataFrame(
        {
            "engine": ["a", "a", "b", "b"],
            "kernel_class": ["tensor_core_conv", "elementwise", "tensor_core_conv", "elementwise"],
            "start_us": [0.0, 10.0, 5.0, 30.0],
            "duration_us": [10.0, 10.0, 10.0, 5.0],
        }
    )
    t = sharing.kernel_classes(k, {"a": 2, "b": 1}, BIG, "streams").set_index(
        ["engine", "kernel_class"]
    )
    assert t.loc[("a", "tensor_core_conv"), "time_share"] == pytest.approx(0.5)
    assert t.loc[("a", "tensor_core_conv"), "overlap_us"] == pytest.approx(5.0)
    assert t.loc[("a", "elementwise"), "overlap_us"] == pytest.approx(5.0)
    assert t.loc[("b", "tensor_core_conv"), "overlap_share"] == pytest.approx(1.0)
    assert t.loc[("b", "elementwise"), "overlap_us"] == 0.0
    assert t.loc[("a", "elementwise"), "time_us_per_batch"] == pytest.approx(5.0)


# ---- facts and rules ---------------------------------------------------------------------------


def _table(b_streams=1000.0, b_processes=600.0, p99_b=1.5, a_streams=1700.0, equal=1.0):
    """A sharing table: big engine a 1800 img/s alone, small b 1100 img/s alone (p99 1.0 ms)."""
    rows = []

    def add(pair, mode, eng, img, p99, width, batch):
        rows.append(
            {
                "pair": pair,
                "mode": mode,
                "engine": eng,
                "config": f"yolov8_w{width:g}_fp16_nhwc_b{batch}",
                "width": width,
                "batch": batch,
                "batches": 100,
                "img_per_s": img,
                "p50_ms": p99 / 2,
                "p99_ms": p99,
            }
        )

    add(BIG, "alone_a", "a", 1800.0, 9.0, 1.0, 16)
    add(BIG, "alone_b", "b", 1100.0, 1.0, 0.25, 1)
    add(BIG, "streams", "a", a_streams, 10.0, 1.0, 16)
    add(BIG, "streams", "b", b_streams, p99_b, 0.25, 1)
    add(BIG, "processes", "a", 1000.0, 15.0, 1.0, 16)
    add(BIG, "processes", "b", b_processes, 4.0, 0.25, 1)
    for mode in ("alone_a", "alone_b"):
        add(EQUAL, mode, mode[-1], 3600.0, 5.0, 0.5, 16)
    for eng in "ab":
        add(EQUAL, "streams", eng, 3600.0 * equal / 2, 8.0, 0.5, 16)
    return pd.DataFrame(rows).assign(mps_used=False, mig_used=False, mps_server="not running")


def _verdict(table, rule_id, kernels=None):
    v = evaluate(RULES, sharing.sharing_facts(table, kernels)).set_index("id")
    return v.loc[f"sharing_{rule_id}"]


def test_totals_and_rates_from_the_table():
    t = sharing.totals(_table()).set_index(["pair", "mode"])
    assert t.loc[(BIG, "streams"), "sum_over_best_alone"] == pytest.approx(2700 / 1800)
    assert t.loc[(BIG, "streams"), "work_done"] == pytest.approx(1700 / 1800 + 1000 / 1100)
    r = sharing.rates(_table()).set_index(["pair", "mode", "engine"])
    assert r.loc[(BIG, "processes", "b"), "p99_inflation"] == pytest.approx(4.0)
    assert r.loc[(BIG, "streams", "a"), "slowdown"] == pytest.approx(1800 / 1700)
    assert list(sharing.rates(_table()).query("pair == @BIG")["mode"].unique()) == list(
        sharing.MODES
    )


def test_total_gain_rule_flips_with_the_small_models_rate():
    # summed 1700 + b over best alone 1800: >= 1.2 needs b >= 460
    assert _verdict(_table(b_streams=500.0), "streams_total").verdict == HOLDS
    assert _verdict(_table(b_streams=300.0), "streams_total").verdict == PARTLY
    assert _verdict(_table(b_streams=50.0, a_streams=1000.0), "streams_total").verdict == FAILS
    assert _verdict(_table(b_processes=1000.0), "processes_total").verdict == PARTLY
    assert _verdict(_table(b_processes=100.0), "processes_total").verdict == FAILS


def test_p99_rule_flips_with_the_small_models_tail():
    assert _verdict(_table(p99_b=1.9), "small_p99_streams").verdict == HOLDS
    assert _verdict(_table(p99_b=3.0), "small_p99_streams").verdict == PARTLY
    assert _verdict(_table(p99_b=5.0), "small_p99_streams").verdict == FAILS


def test_work_done_and_streams_over_processes_rules():
    assert _verdict(_table(equal=1.3), "equal_work_streams").verdict == HOLDS
    assert _verdict(_table(equal=0.9), "equal_work_streams").verdict == FAILS
    # streams sum 2700 over processes sum 1600
    assert _verdict(_table(), "streams_beat_processes").verdict == HOLDS
    assert _verdict(_table(b_processes=1650.0), "streams_beat_processes").verdict == PARTLY


def test_overlap_rule_reads_the_kernel_table_and_is_untested_without_it():
    def kernels(overlap):
        return pd.DataFrame(
            {
                "pair": [BIG] * 2,
                "mode": ["streams"] * 2,
                "engine": ["b", "b"],
                "kernel_class": ["tensor_core_conv", "elementwise"],
                "time_us": [60.0, 40.0],
                "overlap_us": [60.0 * overlap, 40.0 * overlap],
            }
        )

    assert _verdict(_table(), "small_overlaps_big", kernels(0.8)).verdict == HOLDS
    assert _verdict(_table(), "small_overlaps_big", kernels(0.2)).verdict == FAILS
    assert _verdict(_table(), "small_overlaps_big").verdict == NOT_TESTED


def test_a_pair_without_its_together_rows_is_not_tested():
    t = _table()
    t = t[~((t.pair == BIG) & (t["mode"] == "streams"))]
    assert _verdict(t, "streams_total").verdict == NOT_TESTED
    assert math.isnan(_verdict(t, "small_p99_streams").measured)


def test_kernel_slowdown_divides_together_by_alone():
    rows = []
    for mode, eng, us in (("alone_a", "a", 100.0), ("streams", "a", 150.0), ("alone_b", "b", 10.0)):
        rows.append(
            {
                "pair": BIG,
                "mode": mode,
                "engine": eng,
                "kernel_class": "tensor_core_conv",
                "time_us_per_batch": us,
                "time_share": 1.0,
                "overlap_share": 0.5,
            }
        )
    s = sharing.kernel_slowdown(pd.DataFrame(rows))
    assert len(s) == 1 and s.iloc[0].slowdown == pytest.approx(1.5)


# ---- the plan and its parameters ---------------------------------------------------------------


def test_pairs_parse_and_bad_pairs_are_one_sentence():
    from yolo_sm.contract.plans import check_params
    from yolo_sm.topics.sharing import parse_pair

    assert parse_pair("1.0x16+0.25x1") == ((1.0, 16), (0.25, 1))
    assert sharing.pair_label(*parse_pair("1.0x16 + 0.25x1")) == BIG
    for bad in ("1.0x16", "1.0x16+0.25", "ax1+1x1", "1x0+1x1", "1x1+1x1+1x1"):
        with pytest.raises(UserError):
            parse_pair(bad)
    check_params("sharing", {"pairs": ["1.0x16+0.25x1"], "seconds": 1.5}, "step")
    with pytest.raises(UserError, match="seconds"):
        check_params("sharing", {"seconds": -1}, "step")
    with pytest.raises(UserError, match="unknown"):
        check_params("sharing", {"second": 1}, "step")


def test_the_h200_plan_has_the_sharing_and_stall_steps():
    from yolo_sm.contract.datasets import data_dir
    from yolo_sm.contract.plans import load_plan

    plan = load_plan(data_dir() / "plans" / "full.yaml")
    steps = {s.name: s for s in plan.steps}
    assert steps["sharing"].kind == "sharing" and steps["sharing"].est_s <= 45
    assert steps["ncu_stalls_w1"].params["metric_set"] == "stalls"


# ---- trace -> engine ---------------------------------------------------------------------------


def test_kernels_map_to_the_engine_whose_range_launched_them(tmp_path):
    from yolo_sm.topics.sharing.collect_run import RANGE, engine_kernels

    ev = []
    for i, (name, t) in enumerate((("a", 0), ("b", 20), ("a", 40))):
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": RANGE + name,
                "pid": 1,
                "tid": 7,
                "ts": t,
                "dur": 10,
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaGraphLaunch",
                "pid": 1,
                "tid": 7,
                "ts": t + 2,
                "dur": 3,
                "args": {"correlation": 100 + i},
            }
        )
        for j in range(2):
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "pid": 0,
                    "tid": 9,
                    "name": "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc",
                    "ts": 100 + 10 * i + j,
                    "dur": 1,
                    "args": {"correlation": 100 + i, "stream": 13},
                }
            )
    ev.append(
        {
            "ph": "X",
            "cat": "kernel",
            "pid": 0,
            "tid": 9,
            "name": "stray",
            "ts": 500,
            "dur": 1,
            "args": {"correlation": 999},
        }
    )
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    k, replays = engine_kernels(path, ["a", "b"])
    assert replays == {"a": 2, "b": 1}
    assert list(k.engine) == ["a", "a", "b", "b", "a", "a"]
    assert set(k.kernel_class) == {"tensor_core_conv"}


# ---- GPM power -----------------------------------------------------------------------------------


def test_gpm_sampler_records_board_power_in_watts():
    from tests.test_gpm import HZ, FakeNVML, wait_for
    from yolo_sm.analyse.gpm import wide
    from yolo_sm.core.profiling.gpm import POWER_METRIC, GpmSampler

    class PowerNVML(FakeNVML):
        def nvmlDeviceGetPowerUsage(self, handle):
            return 412_500  # mW

    with GpmSampler(hz=HZ, nvml=PowerNVML(), power=True) as s:
        s.mark(phase="run")
        wait_for(lambda: len({r["t_s"] for r in s.rows}) >= 3)
    w = wide(s.to_frame())
    assert (w[POWER_METRIC] == 412.5).all() and (w.sm_util_pct == 88.0).all()
    with GpmSampler(hz=HZ, nvml=FakeNVML()) as s:  # power off by default
        wait_for(lambda: len(s.rows) >= 4)
    assert POWER_METRIC not in set(s.to_frame().metric)


# ---- the collector on a CPU ----------------------------------------------------------------------


def test_collector_runs_alone_and_together_on_a_cpu():
    from yolo_sm.topics.sharing.collect import run_sharing

    out = run_sharing(
        ["0.25x1+0.25x2"],
        "cpu",
        precision="fp32",
        layout="nchw",
        backend="eager",
        imgsz=64,
        seconds=0.3,
        gap_s=0.0,
        processes=False,
    )
    t = out["sharing"]
    assert list(t["mode"]) == ["alone_a", "alone_b", "streams", "streams"]
    assert (t.img_per_s > 0).all() and (t.p99_ms >= t.p50_ms).all() and (t.batches > 0).all()
    assert not t.mps_used.any() and set(t.compute_mode) == {"no GPU"}
    from yolo_sm.contract.schema import validate

    validate(t, "sharing")
    validate(out["kernels"], "sharing_kernels")  # empty on a CPU: no kernels


# ---- the notebooks on synthetic tables ----------------------------------------------------------


@pytest.mark.notebooks
def test_two_models_notebook_draws_every_section_from_the_sharing_tables(make_root):
    """17 executes and renders from a root holding the synthetic sharing fixture beside the
    shipped sweep: no section falls back to its one-line note."""
    from tests.fixtures.synthetic_sharing import GPU, ship
    from tests.test_notebooks import NOTEBOOKS, _executes_and_renders

    root = make_root("h200", ["sweep_fp16_nhwc"])
    ship(root)
    nb, html = _executes_and_renders(NOTEBOOKS[0].parent / "17_two_models.ipynb", root)
    assert "holds no" not in html
    assert html.count("Plotly.newPlot") >= 5 and GPU in html
    assert "board power" in html


@pytest.mark.notebooks
def test_occupancy_notebook_shows_the_stall_reasons(make_root, tmp_path):
    from tests.fixtures.synthetic_sharing import ship_stalls
    from tests.test_ncu_stalls import KERNELS, _csv
    from tests.test_notebooks import NOTEBOOKS, _executes_and_renders

    root = make_root("h200", ["ncu_width_b8"])
    ship_stalls(root, _csv(KERNELS), tmp_path)
    nb, html = _executes_and_renders(NOTEBOOKS[0].parent / "04_occupancy_heatmaps.ipynb", root)
    assert "holds no `ncu_stalls_w1`" not in html
    assert "math_pipe_throttle" in html and "stall reason" in html


def test_plan_step_writes_and_registers_the_sharing_table_on_a_cpu(tmp_path):
    import yaml

    from yolo_sm.contract.datasets import open_root
    from yolo_sm.contract.plans import load_plan
    from yolo_sm.core.plans import run_plan

    plan = tmp_path / "p.yaml"
    params = {
        "pairs": ["0.25x1+0.25x1"],
        "precision": "fp32",
        "layout": "nchw",
        "backend": "eager",
        "imgsz": 64,
        "seconds": 0.2,
        "gap_s": 0,
        "processes": False,
    }
    step = {"name": "sharing", "kind": "sharing", "out": "sharing.parquet", "params": params}
    plan.write_text(yaml.safe_dump({"name": "cpu", "device": "cpu", "steps": [step]}))
    st = run_plan(load_plan(plan), tmp_path / "out", progress=False)
    assert list(st.state) == ["done"]
    root = open_root(tmp_path / "out")
    t = root.load("sharing")
    assert len(t) == 4 and (t.img_per_s > 0).all() and "prov_date_utc" in t
    assert not root.has("sharing_gpm")  # no GPM on a CPU: no empty table registered
    again = run_plan(load_plan(plan), tmp_path / "out", progress=False)
    assert list(again.state) == ["done"]

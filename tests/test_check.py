"""yolo-sm check, the hardware-metric regression gate, on copies of a shipped sweep (CPU)."""

import json

import pandas as pd
import pytest

from yolo_sm.analyse import regress
from yolo_sm.cli.main import main
from yolo_sm.contract import datasets
from yolo_sm.contract.errors import UserError

SWEEP = "h200/sweep_fp16_nhwc"


@pytest.fixture(scope="module")
def sweep():
    return datasets.load(SWEEP)


def _check(tmp_path, df, *extra):
    path = tmp_path / "cand.parquet"
    df.to_parquet(path)
    out = tmp_path / "check.json"
    rc = main(["check", "--baseline", SWEEP, "--candidate", str(path), "--json", str(out), *extra])
    return rc, (json.loads(out.read_text()) if out.exists() else None)


def test_the_sweep_itself_passes(tmp_path, sweep):
    rc, got = _check(tmp_path, sweep)
    assert rc == 0 and got["passed"] and got["regressed"] == 0
    assert got["points"] == int((sweep.status == "ok").sum())


def test_img_per_s_scaled_by_0_8_regresses(tmp_path, sweep):
    rc, got = _check(tmp_path, sweep.assign(img_per_s=sweep.img_per_s * 0.8))
    assert rc == 1 and not got["passed"]
    bad = pd.DataFrame(got["comparisons"])
    bad = bad[bad.regressed]
    assert set(bad.metric) == {"img_per_s"}
    # every point slowed alike, so a host-bound point's ratio to its CUDA graph did not move
    assert (bad.basis == "absolute").all() and not bad.host_bound.any()


def test_a_table_without_the_key_columns_is_bad_input(tmp_path, sweep, capsys):
    rc, got = _check(tmp_path, sweep.drop(columns=["layout", "backend"]))
    assert rc == 2 and got is None
    assert "key column" in capsys.readouterr().err


def test_the_tolerance_and_metrics_flags(tmp_path, sweep):
    slower = sweep.assign(img_per_s=sweep.img_per_s * 0.95)
    assert _check(tmp_path, slower)[0] == 0  # within 10 %
    assert _check(tmp_path, slower, "--tolerance", "0.03")[0] == 1
    assert _check(tmp_path, slower, "--tolerance", "0.03", "--metrics", "median_ms")[0] == 0
    assert _check(tmp_path, slower, "--metrics", "bogus")[0] == 2


def _table(rows):
    base = dict(
        family="yolov8",
        scale="",
        width=1.0,
        depth=0.33,
        max_channels=2048,
        precision="fp16",
        layout="nhwc",
        imgsz=640,
        compile_mode="default",
        device="cuda",
        status="ok",
    )
    return pd.DataFrame([{**base, **r} for r in rows])


def test_host_bound_points_report_their_time_and_are_gated_on_their_gpu_work():
    base = _table(
        [
            dict(backend="eager", batch=1, img_per_s=200.0, host_bound=True, gpu_busy_ms=1.0,
                 launches_per_forward=236.0),
            dict(backend="cudagraph", batch=1, img_per_s=1000.0, host_bound=False,
                 gpu_busy_ms=0.95, launches_per_forward=1.0),
            dict(backend="eager", batch=64, img_per_s=3000.0, host_bound=False,
                 gpu_busy_ms=20.0, launches_per_forward=290.0),
            dict(backend="cudagraph", batch=64, img_per_s=3100.0, host_bound=False,
                 gpu_busy_ms=20.0, launches_per_forward=1.0),
        ]
    )  # fmt: skip
    # a faster host: the eager batch-1 point doubles; the graph slows by 5 %; GPU work as before
    cand = base.assign(img_per_s=[400.0, 950.0, 3000.0, 3100.0])
    cmp = regress.compare(base, cand)
    e1 = cmp[(cmp.backend == "eager") & (cmp.batch == 1)].set_index("metric")
    assert e1.basis["img_per_s"] == "same_process" and e1.host_bound.all()
    assert e1.change["img_per_s"] == pytest.approx((400 / 950) / (200 / 1000))
    assert not e1.gated["img_per_s"] and not e1.regressed["img_per_s"]  # reported only
    assert e1.gated["gpu_busy_ms"] and e1.gated["launches_per_forward"]
    pts = regress.points(cmp).set_index(["backend", "batch"])
    assert pts.loc[("eager", 1), "within"]
    assert set(pts.loc[("eager", 1), "gated_metrics"].split(",")) == set(regress.INVARIANT)
    assert pts.loc[("eager", 64), "gated_metrics"].startswith("img_per_s")
    assert regress.verdict(cmp)["passed"]
    # slower on the host alone (half the img/s): still not a regression
    slow = base.assign(img_per_s=[100.0, 1000.0, 3000.0, 3100.0])
    assert regress.verdict(regress.compare(base, slow))["passed"]
    # the host-bound point's GPU work grows 30 %: a regression the host cannot explain
    heavier = base.assign(gpu_busy_ms=[1.3, 0.95, 20.0, 20.0])
    got = regress.compare(base, heavier)
    assert got.regressed.tolist().count(True) == 1 and not regress.verdict(got)["passed"]
    assert regress.points(got).set_index(["backend", "batch"]).loc[("eager", 1), "regressed"]
    # neither GPU work nor a reference: reported, not decided
    old = base.drop(columns=["gpu_busy_ms", "launches_per_forward"])
    lone = old[old.backend == "eager"].assign(img_per_s=[150.0, 3000.0])
    cmp = regress.compare(old, lone, metrics=["img_per_s"]).set_index("batch")
    assert cmp.basis[1] == "no_reference" and not cmp.regressed[1] and pd.isna(cmp.within[1])
    assert regress.verdict(regress.compare(old, lone))["undecided"] == 1


def test_bad_inputs_are_user_errors(sweep):
    with pytest.raises(UserError, match="no measured"):
        regress.compare(sweep, sweep.assign(status="error"))
    with pytest.raises(UserError, match="share none of the metrics"):
        regress.compare(sweep[list(regress.KEY_COLUMNS) + ["status"]], sweep)
    with pytest.raises(UserError, match="tolerance"):
        regress.compare(sweep, sweep, tolerance=-1)


def test_host_bound_points_without_a_graph_use_the_launch_cost_where_both_tables_have_it():
    base = _table(
        [dict(backend="eager", batch=1, median_ms=5.0, img_per_s=200.0, host_bound=True,
              host_launch_us=10.0)]
    )  # fmt: skip
    # a host twice as fast: half the launch cost, the eager forward twice as fast
    cand = base.assign(median_ms=[2.5], img_per_s=[400.0], host_launch_us=[5.0])
    cmp = regress.compare(base, cand, metrics=["img_per_s", "median_ms"]).set_index("metric")
    assert (cmp.basis == "host_normalised").all()
    assert cmp.change["img_per_s"] == pytest.approx(1.0)
    assert cmp.change["median_ms"] == pytest.approx(1.0)
    # the same host, the eager forward 30 % slower: outside, reported, not gated
    slow = cand.assign(median_ms=[2.5 / 0.7], img_per_s=[280.0])
    got = regress.compare(base, slow, metrics=["img_per_s", "median_ms"])
    assert (got.within == False).all() and not got.gated.any() and not got.regressed.any()  # noqa: E712


def test_host_bound_points_from_another_host_are_refused_naming_both(tmp_path, sweep, capsys):
    assert sweep.host_bound.fillna(False).astype(bool).any()  # the fact the refusal rests on
    other = sweep.assign(prov_cpu_model="Another CPU 9000")
    rc, got = _check(tmp_path, other)
    out, err = capsys.readouterr()
    assert rc == 2 and got is None and err.count("\n") == 1
    assert "Another CPU 9000" in err and str(sweep.prov_cpu_model.iloc[0]) in err
    assert "Another CPU 9000" in out  # both machines named before the verdict
    # the same host: gated as before
    rc, _ = _check(tmp_path, sweep)
    assert rc == 0
    # no host-bound point: nothing depends on the host, so different hosts are compared
    steady = sweep.assign(host_bound=False)
    path = tmp_path / "base.parquet"
    steady.to_parquet(path)
    cand = tmp_path / "cand2.parquet"
    steady.assign(prov_cpu_model="Another CPU 9000").to_parquet(cand)
    assert main(["check", "--baseline", str(path), "--candidate", str(cand)]) == 0


def _repeat_check(tmp_path, scale=1.0, mem_add=0):
    cand = datasets.load("h200_repeat/sweep_fp16_nhwc")
    cand = cand.assign(
        img_per_s=cand.img_per_s * scale, peak_mem_bytes=cand.peak_mem_bytes + mem_add
    )
    path = tmp_path / "repeat.parquet"
    cand.to_parquet(path)
    return main(["check", "--baseline", SWEEP, "--candidate", str(path)])


def test_the_shipped_repeat_passes_and_its_slowed_copy_fails(tmp_path):
    assert _repeat_check(tmp_path) == 0
    assert _repeat_check(tmp_path, scale=0.8) == 1


def test_peak_memory_moves_under_the_floor_pass_and_above_it_regress():
    base = datasets.load(SWEEP)
    small = base.peak_mem_bytes.min()  # a peak of about 31 MB, at most doubled below the floor
    assert small < regress.MEMORY_FLOOR_BYTES
    near = base.assign(peak_mem_bytes=base.peak_mem_bytes + regress.MEMORY_FLOOR_BYTES - 1)
    past = base.assign(peak_mem_bytes=base.peak_mem_bytes + regress.MEMORY_FLOOR_BYTES + 1)
    mem = ["peak_mem_bytes"]
    assert not regress.compare(base, near, metrics=mem).regressed.any()
    hit = regress.compare(base, past, metrics=mem)
    # past the floor, the points whose share also moved past 10 % regress (the small ones)
    share = (regress.MEMORY_FLOOR_BYTES + 1) / hit.baseline
    assert (hit.regressed == (share > 0.1)).all() and hit.regressed.any()

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


def test_host_bound_points_compare_as_ratios_to_their_graph_in_the_same_table():
    base = _table(
        [
            dict(backend="eager", batch=1, img_per_s=200.0, host_bound=True),
            dict(backend="cudagraph", batch=1, img_per_s=1000.0, host_bound=False),
            dict(backend="eager", batch=64, img_per_s=3000.0, host_bound=False),
            dict(backend="cudagraph", batch=64, img_per_s=3100.0, host_bound=False),
        ]
    )
    # a faster host: the eager batch-1 point doubles; the graph slows by 5 %
    cand = base.assign(img_per_s=[400.0, 950.0, 3000.0, 3100.0])
    cmp = regress.compare(base, cand, metrics=["img_per_s"]).set_index(["backend", "batch"])
    e1 = cmp.loc[("eager", 1)]
    assert e1.basis == "same_process" and e1.host_bound
    assert e1.change == pytest.approx((400 / 950) / (200 / 1000))
    assert not e1.regressed and e1.within == False  # noqa: E712 - faster, but not a repeat
    assert cmp.loc[("eager", 64)].basis == "absolute"
    # the same host-bound point slowing against its reference regresses
    cand2 = base.assign(img_per_s=[150.0, 1000.0, 3000.0, 3100.0])
    assert regress.compare(base, cand2, metrics=["img_per_s"]).regressed.tolist() == [
        True,
        False,
        False,
        False,
    ]
    # no reference in the candidate: reported, not decided
    lone = cand2[cand2.backend == "eager"]
    cmp = regress.compare(base, lone, metrics=["img_per_s"]).set_index("batch")
    assert cmp.basis[1] == "no_reference" and not cmp.regressed[1] and pd.isna(cmp.within[1])
    assert regress.verdict(regress.compare(base, lone))["undecided"] == 1


def test_bad_inputs_are_user_errors(sweep):
    with pytest.raises(UserError, match="no measured"):
        regress.compare(sweep, sweep.assign(status="error"))
    with pytest.raises(UserError, match="share none of the metrics"):
        regress.compare(sweep[list(regress.KEY_COLUMNS) + ["status"]], sweep)
    with pytest.raises(UserError, match="tolerance"):
        regress.compare(sweep, sweep, tolerance=-1)


def test_host_bound_points_use_the_launch_cost_where_both_tables_have_it():
    base = _table(
        [
            dict(backend="eager", batch=1, median_ms=5.0, img_per_s=200.0, host_bound=True,
                 host_launch_us=10.0),
            dict(backend="cudagraph", batch=1, median_ms=1.0, img_per_s=1000.0, host_bound=False,
                 host_launch_us=10.0),
        ]
    )  # fmt: skip
    # a host twice as fast: half the launch cost, the eager forward twice as fast
    cand = base.assign(median_ms=[2.5, 1.0], img_per_s=[400.0, 1000.0], host_launch_us=[5.0, 5.0])
    cmp = regress.compare(base, cand, metrics=["img_per_s", "median_ms"])
    e = cmp[cmp.backend == "eager"].set_index("metric")
    assert (e.basis == "host_normalised").all()
    assert e.change["img_per_s"] == pytest.approx(1.0) and e.change["median_ms"] == pytest.approx(
        1.0
    )
    assert not cmp.regressed.any()
    # the same host, the eager forward 30 % slower: a regression
    slow = cand.assign(median_ms=[2.5 / 0.7, 1.0], img_per_s=[280.0, 1000.0])
    got = regress.compare(base, slow, metrics=["img_per_s", "median_ms"])
    assert got[got.backend == "eager"].regressed.all()

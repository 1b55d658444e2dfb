"""yolo-sm remeasure: random points of a shipped sweep measured again with its settings (CPU)."""

import pandas as pd
import pytest

from yolo_sm.cli.main import main
from yolo_sm.contract import datasets, manifest
from yolo_sm.contract.errors import UserError
from yolo_sm.topics.compare import collect as remeasure

SWEEP = dict(
    family=("yolov8",),
    widths=(0.0625,),
    precisions=("fp32",),
    layouts=("nchw",),
    backends=("eager",),
    batches=(1, 2, 16),
    imgsz=(64,),
    device="cpu",
    budget_ms=20.0,
    warmup_ms=2.0,
)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A tiny CPU sweep registered as dataset m/s."""
    from yolo_sm.core.sweep import SweepSpec, run_sweep

    root = tmp_path_factory.mktemp("data")
    folder = root / "m"
    folder.mkdir()
    run_sweep(SweepSpec(**SWEEP), folder / "s.parquet", progress=False)
    manifest.register(folder, "s", "s.parquet", "sweep", "tiny", "yolo-sm sweep ...")
    return root


def test_remeasure_draws_reproducibly_and_compares(shipped, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("YOLO_SM_DATA", str(shipped))
    old = datasets.load("m/s")
    a, b = remeasure.pick(old, 2, seed=7), remeasure.pick(old, 2, seed=7)
    assert a.index.tolist() == b.index.tolist()  # the draw is the seed's, on any machine
    assert remeasure._timing_settings("m/s") == {"budget_ms": 20.0, "warmup_ms": 2.0}
    out = tmp_path / "r.parquet"
    rc = main(
        [
            "remeasure",
            "--dataset",
            "m/s",
            "--points",
            "2",
            "--seed",
            "7",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    raw = pd.read_parquet(out)  # the re-measured rows, in the sweep's format
    assert (raw.role == "point").all() and (raw.budget_ms == 20.0).all()  # no graphs on a CPU
    df = remeasure.comparison(old[old.status == "ok"], a, raw)
    assert rc == (0 if df.within_10pct.all() else 1)  # remeasure gates on the tolerance
    assert df.batch.tolist() == a.batch.tolist() and (df.status == "ok").all()
    assert (df.shipped_img_per_s == a.img_per_s.to_numpy()).all()
    assert (df.ratio == df.new_img_per_s / df.shipped_img_per_s).all() and (df.ratio > 0).all()
    # on a CPU the host is the device: every point is compared on its own img/s
    assert (df.basis == "absolute").all() and not df.host_bound.any()
    assert (df.rule_ratio == df.ratio).all()
    assert (df.within_10pct == ((df.ratio - 1).abs() <= 0.10)).all()
    assert (df.launch_bound == (df.batch <= 8)).all()  # the old heuristic, kept for reference
    assert df.new_date_utc.notna().all()
    text = capsys.readouterr().out
    assert f"{int(df.within_10pct.sum())} of 2 points within 10 %" in text


def test_remeasure_bad_requests_are_one_clear_error(shipped, monkeypatch):
    monkeypatch.setenv("YOLO_SM_DATA", str(shipped))
    with pytest.raises(UserError, match="measured .ok. points"):
        remeasure.remeasure("m/s", n=99, progress=False)
    with pytest.raises(UserError, match="at least 1"):
        remeasure.remeasure("m/s", n=0, progress=False)
    with pytest.raises(UserError, match="unknown dataset"):
        remeasure.remeasure("m/nope", progress=False)
    assert main(["remeasure", "--dataset", "m/nope"]) == 2
    monkeypatch.delenv("YOLO_SM_DATA")
    with pytest.raises(UserError, match="ceilings dataset; remeasure takes a sweep"):
        remeasure.remeasure("h200/ceilings", progress=False)


# --- host-bound points ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "busy, launches, expected",
    [
        (0.95, 200, False),  # busy past 1 - HOST_BOUND_IDLE_SHARE
        (0.85, 200, True),  # idle 15 % of the forward with 200 launches
        (0.5, 1, False),  # one launch (a graph replay): its gaps are the graph's own
        (0.5, 2, False),  # a replay and the copy of its input
        (0.5, 3, True),
        (float("nan"), 200, False),
    ],
)
def test_host_bound_rule(busy, launches, expected):
    from yolo_sm.analyse.hostbound import host_bound_rule

    assert bool(host_bound_rule(busy, launches)) is expected


def test_host_bound_uses_the_measured_column_and_falls_back_to_the_heuristic():
    import pandas as pd

    from yolo_sm.analyse.hostbound import host_bound

    old = pd.DataFrame({"backend": ["eager", "eager", "cudagraph"], "batch": [1, 16, 1]})
    assert host_bound(old).tolist() == [True, False, False]  # eager at batch <= 8
    assert not host_bound(old.assign(device="cpu")).any()  # on a CPU the host is the device
    new = old.assign(host_bound=[False, True, None])  # measured; the last row unknown
    assert host_bound(new).tolist() == [False, True, False]

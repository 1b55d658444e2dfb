"""yolo-sm remeasure: random points of a shipped sweep measured again with its settings (CPU)."""

import pandas as pd
import pytest

from yolo_sm.analyse import remeasure as remeasure_tables
from yolo_sm.cli.main import main
from yolo_sm.collect import remeasure
from yolo_sm.contract import datasets, manifest
from yolo_sm.contract.errors import UserError
from yolo_sm.report import remeasure_plots

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
    from yolo_sm.collect.sweep import SweepSpec, run_sweep

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
    assert rc == 0
    df = pd.read_parquet(out)
    assert df.batch.tolist() == a.batch.tolist() and (df.status == "ok").all()
    assert (df.shipped_img_per_s == a.img_per_s.to_numpy()).all()
    assert (df.ratio == df.new_img_per_s / df.shipped_img_per_s).all() and (df.ratio > 0).all()
    assert (df.within_10pct == ((df.ratio - 1).abs() <= 0.10)).all()
    assert (df.launch_bound == (df.batch <= 8)).all()  # eager at batch <= 8
    assert (df.budget_ms == 20.0).all() and df.new_date_utc.notna().all()
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


def test_compare_two_tables_of_the_same_points():
    a = datasets.load("h200/sweep_fp16_nhwc")
    b = a.copy()
    b["img_per_s"] = b.img_per_s * (b.batch.map({1: 0.5}).fillna(1.05))  # batch 1 halves
    b["prov_date_utc"] = "2026-11-30T18:30:00+00:00"
    b.loc[b.index[0], "status"] = "error"  # a failed point in the second table: not compared
    c = remeasure_tables.compare(a, b)
    assert len(c) == int((a.status == "ok").sum()) - 1
    assert c.ratio.round(6).isin([0.5, 1.05]).all()
    assert (c.within_10pct == (c.batch != 1)).all()
    assert (c.launch_bound == ((c.backend == "eager") & (c.batch <= 8))).all()
    k = remeasure_tables.by_kind(c).set_index(["backend", "launch_bound"])
    assert k.points.sum() == len(c)
    graph = c[c.backend == "cudagraph"]
    assert k.loc[("cudagraph", False), "within_10pct"] == int((graph.batch != 1).sum())
    text = remeasure_plots.compare_findings(c, "A", "B")
    assert f"{len(c)} points of A were measured again in B" in text
    assert "CUDA graph" in text and "launch-bound" in text
    assert len(remeasure_plots.plot_compare(c).data) >= 2
    # other points (another precision) share nothing
    none = remeasure_tables.compare(a, b.assign(precision="bf16"))
    assert none.empty and "share no point" in remeasure_plots.compare_findings(none, "A", "B")


def test_the_shipped_fp16_grid_measured_again():
    a = datasets.load("h200/sweep_fp16_nhwc")
    b = datasets.load("h200/sweep_bf16_nhwc")
    c = remeasure_tables.compare(a, b[b.precision == "fp16"])
    assert len(c) == len(a)  # every point of the grid was measured again
    assert c[c.backend == "cudagraph"].within_10pct.all()

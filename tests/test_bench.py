"""The side-by-side benchmark on CPU (tiny model): every variant, ratios against the baseline,
failures as rows, resumption per (model, batch) and the deadline (with a fake unit runner)."""

import math
from pathlib import Path

import pandas as pd
import pytest

from yolo_sm.cli.main import main
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import BenchStep
from yolo_sm.core import bench
from yolo_sm.core.nms import nms_label


def test_bench_table_on_cpu(tmp_path, capsys):
    out = tmp_path / "b.parquet"
    argv = [
        "bench",
        "--device",
        "cpu",
        "--models",
        "yolov8:0.0625",
        "--batches",
        "1",
        "--engines",
        "eager/fp32/nchw",
        "--seconds",
        "0.3",
        "--pipeline",
        "topk",
        "--nms-topk",
        "300",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    df = pd.read_parquet(out)
    assert set(df.nms.dropna()) == {nms_label(300)}
    assert list(df.variant) == [
        "eager/fp16/nhwc",
        "eager/fp32/nchw",
        "pipeline/eager/fp32/nhwc/topk/s1",
        "pipeline/eager/fp32/nhwc/topk/s4",
        "ultralytics_predict",
    ]
    assert (df.status == "ok").all() and (df.img_per_s > 0).all()
    assert df.loc[df.variant == "eager/fp16/nhwc", "vs_baseline"].item() == 1.0
    ratio = df.img_per_s / df.img_per_s.iloc[0]
    assert (abs(df.vs_baseline - ratio) < 1e-9).all()
    assert df.prov_torch.notna().all()
    pipe = df[df.variant.str.startswith("pipeline/")]
    assert pipe.streams.tolist() == [1, 4] and (pipe.model_only_img_per_s > 0).all()
    assert pipe.pinned.tolist() == [False, False]  # nothing is pinned on a CPU
    assert (pipe.candidates_per_frame >= pipe.boxes_per_frame).all()  # NMS's work is recorded
    assert (pipe.boxes_per_frame >= 0).all()
    assert (
        abs(pipe.pipeline_vs_model_only - pipe.img_per_s / pipe.model_only_img_per_s) < 1e-9
    ).all()
    assert (df.p99_ms >= df.median_ms).all()
    engines = df[df.scope == "model_only"]
    assert (engines.build_s > 0).all() and (pipe.build_s > 0).all()
    # the engines were timed in interleaved rounds: the median of the rounds' medians, their
    # spread, and no SM clock on a CPU
    assert (engines.rounds == bench.ROUNDS).all()
    for r in engines.itertuples():
        assert len(r.round_ms) == bench.ROUNDS and r.median_ms == pytest.approx(
            pd.Series(r.round_ms).median()
        )
        spread = (max(r.round_ms) - min(r.round_ms)) / r.median_ms * 100
        assert r.round_spread_pct == pytest.approx(spread)
    assert engines.sm_clock_mhz.isna().all()


def test_engine_rows_carry_every_build_column_the_sweep_records_and_the_schema_describes():
    """What run_point takes from an engine's info (compile_first_s, capture_s, ...) reaches the
    bench row wherever the bench schema describes it; a column left out of the carried list
    is silently absent from every bench table."""
    from yolo_sm.contract.schema import SCHEMAS
    from yolo_sm.core.sweep import ENGINE_INFO_COLUMNS

    described = set(ENGINE_INFO_COLUMNS) & set(SCHEMAS["bench"])
    assert "compile_first_s" in described
    assert described <= set(bench._POINT_COLUMNS), described - set(bench._POINT_COLUMNS)


def test_bench_bad_input(tmp_path, capsys):
    for argv in (
        ["--models", "yolov8:wide"],
        ["--batches", "0"],
        ["--engines", "eager/fp16"],
        ["--engines", "warp/fp16/nhwc"],
        ["--streams", "0"],
        ["--models", "resnet50:1"],
        ["--pipeline", "full,fast"],
        ["--nms-topk", "0"],
        ["--pipeline-engine", "eager/fp16"],
    ):
        assert main(["bench", "--device", "cpu", *argv, "--out", str(tmp_path / "x.parquet")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("yolo-sm: error:")
    assert not (tmp_path / "x.parquet").exists()


def test_spec_from_plan_params():
    spec = bench.BenchSpec.from_mapping(
        {
            "family": "yolov8",
            "widths": [0.25, 1.0],
            "batches": "1,16",
            "engines": ["cudagraph/fp16/nhwc", "compile:max-autotune/fp16/nhwc", "eager/fp16/nhwc"],
            "pipeline_engine": "cudagraph/fp16/nhwc",
            "pipeline_streams": [1, 3],
            "pipeline_modes": ["full", "graph"],
            "pipeline_nms_topk": 512,
            "device": "cuda",
        }
    )
    assert spec.pipeline_nms_topk == 512 and spec.pipeline_modes == ("full", "graph")
    assert spec.units() == [
        ("yolov8", 0.25, 1),
        ("yolov8", 0.25, 16),
        ("yolov8", 1.0, 1),
        ("yolov8", 1.0, 16),
    ]
    assert spec.variants() == [
        "eager/fp16/nhwc",
        "cudagraph/fp16/nhwc",
        "compile:max-autotune/fp16/nhwc",  # the baseline listed again is not run twice
        "pipeline/cudagraph/fp16/nhwc/s1",
        "pipeline/cudagraph/fp16/nhwc/s3",
        "pipeline/cudagraph/fp16/nhwc/graph/s1",
        "pipeline/cudagraph/fp16/nhwc/graph/s3",
        "ultralytics_predict",
    ]
    for bad, match in (
        ({"colour": 1}, "unknown bench parameter"),
        ({"engines": ["eager:fast/fp16/nhwc"]}, "only the compile backend"),
        ({"engines": ["compile:fastest/fp16/nhwc"]}, "compile mode"),
        ({"models": "yolov8:1", "widths": [1]}, "either"),
        ({"batches": [1.5]}, "whole number"),
        ({"engines": [0]}, "backend/precision/layout items, got '?0"),  # a YAML number
        ({"pipeline_nms_topk": 0}, "pipeline_nms_topk"),
        ({"pipeline_modes": ["full", "fast"]}, "pipeline_modes must be one of full, topk, graph"),
        ({"pipeline_modes": []}, "pipeline_modes"),
    ):
        with pytest.raises(UserError, match=match):
            bench.BenchSpec.from_mapping(bad)


def test_pipeline_rows_name_the_mode_and_nms_they_ran(tmp_path):
    """A bench with pipeline modes runs one pipeline row per mode, each saying its mode and
    its NMS (the fixed-size NMS first in the topk and graph modes); the other rows carry
    neither."""
    spec = bench.BenchSpec(
        models=(("yolov8", 0.0625),), batches=(1,), engines=(), device="cpu", seconds=0.2,
        predict=False, pipeline_streams=(1,), pipeline_modes=("full", "topk", "graph"),
        pipeline_nms_topk=300,
    )  # fmt: skip
    df = bench.run_bench(spec, tmp_path / "b.parquet", progress=False)
    pipe = df[df.variant.str.startswith("pipeline/")]
    assert (df.status == "ok").all() and len(pipe) == 3
    assert pipe.pipeline_mode.tolist() == ["full", "topk", "graph"]
    assert pipe.variant.tolist() == [
        "pipeline/eager/fp32/nhwc/s1",
        "pipeline/eager/fp32/nhwc/topk/s1",
        "pipeline/eager/fp32/nhwc/graph/s1",
    ]
    assert pipe.nms.tolist() == [nms_label()] + [nms_label(300)] * 2
    other = df[~df.variant.str.startswith("pipeline/")]
    assert other["nms"].isna().all() and other["pipeline_mode"].isna().all()


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def perf_counter(self):
        return self.t

    def monotonic(self):
        return self.t


@pytest.fixture
def fake_units(monkeypatch):
    """bench_unit replaced by a fake that takes 10 s of a fake clock per unit and returns one
    ok row per variant (baseline 100 img/s, every other variant 150)."""
    clock, calls = FakeClock(), []

    def fake_unit(model, family, width, batch, spec, frames):
        calls.append((family, width, batch, tuple(spec.variants())))
        clock.t += 10
        return [
            {
                "family": family,
                "width": width,
                "batch": batch,
                "variant": v,
                "scope": bench._scope(v),
                "status": "ok",
                "message": "",
                "median_ms": 1.0,
                "p99_ms": 2.0,
                "img_per_s": 100.0 if v == "eager/fp16/nhwc" else 150.0,
                "vs_baseline": 1.0 if v == "eager/fp16/nhwc" else 1.5,
            }
            for v in spec.variants()
        ]

    monkeypatch.setattr(bench, "time", clock)
    monkeypatch.setattr(bench, "bench_unit", fake_unit)
    monkeypatch.setattr(bench, "bench_model", lambda family, width: object())
    monkeypatch.setattr(bench, "bundled_frames", lambda: [])
    return clock, calls


def test_bench_stops_before_a_unit_that_would_not_fit_then_resumes(tmp_path, fake_units):
    clock, calls = fake_units
    spec = bench.BenchSpec(
        models=(("yolov8", 0.25), ("yolov8", 0.5)),
        batches=(1, 2),
        engines=(("eager", "fp32", "nchw"),),
        device="cpu",
        est_unit_s=5,
    )
    out = tmp_path / "b.parquet"
    # 25 s left: w0.25 b1 (guess 5 s) and b2 (no b2 unit timed yet: guess 5 s) run, 10 s each;
    # w0.5 b1 would take the w0.25 b1 unit's 10 s scaled to its width (40 s) with 5 s left: stop
    df = bench.run_bench(spec, out, progress=False, deadline=clock.t + 25)
    assert [c[:3] for c in calls] == [("yolov8", 0.25, 1), ("yolov8", 0.25, 2)]
    assert len(df) == 2 * len(spec.variants()) and (df.unit_s == 10).all()
    assert len(pd.read_parquet(out)) == len(df)
    assert bench.missing_units(spec, out) == [("yolov8", 0.5, 1), ("yolov8", 0.5, 2)]
    # no deadline: only the missing units run
    df = bench.run_bench(spec, out, progress=False)
    assert [c[:3] for c in calls[2:]] == [("yolov8", 0.5, 1), ("yolov8", 0.5, 2)]
    assert bench.missing_units(spec, out) == [] and len(df) == 4 * len(spec.variants())
    # a complete table: nothing to do
    bench.run_bench(spec, out, progress=False)
    assert len(calls) == 4
    # a variant added to the spec: every unit is re-measured whole and its rows replaced
    more = bench.BenchSpec(
        **{**spec.__dict__, "engines": (*spec.engines, ("eager", "fp8", "nhwc"))}
    )
    df = bench.run_bench(more, out, progress=False)
    assert len(calls) == 8 and "eager/fp8/nhwc" in set(calls[-1][3])
    assert len(df) == 4 * len(more.variants())
    assert not df.duplicated(["family", "width", "batch", "variant"]).any()


def test_a_wider_unit_is_estimated_from_the_nearest_width_of_its_batch():
    from yolo_sm.core.grid import Pace

    est = bench._estimate(120.0)
    rows = [{"family": "yolov8", "width": 0.5, "batch": 64, "unit_s": 533.0},
            {"family": "yolov8", "width": 0.5, "batch": 16, "unit_s": 90.0},
            {"family": "mine", "width": 1.0, "batch": 16, "unit_s": float("nan")}]  # fmt: skip
    pace = Pace(rows=rows)
    # one width timed at the batch: the square of the width ratio (a cold max-autotune of
    # width 1.0 outlasts width 0.5's, so a 10-minute deadline must not start it)
    assert est(("yolov8", 1.0, 64), pace) == pytest.approx(4 * 533.0)
    assert est(("yolov8", 0.25, 64), pace) == 533.0  # narrower: not scaled down
    assert est(("yolov8", 0.5, 1), pace) == 120.0  # no unit of that batch: the guess
    # another family's units of the batch stand in where the family has none timed
    assert est(("mine", 1.0, 16), pace) == pytest.approx(4 * 90.0)
    # two widths timed: the power fitted through them
    pace.rows.append({"family": "yolov8", "width": 1.0, "batch": 64, "unit_s": 1600.0})
    power = math.log(1600.0 / 533.0) / math.log(2.0)
    assert est(("yolov8", 2.0, 64), pace) == pytest.approx(1600.0 * 2**power)
    assert est(("mine", 2.0, 64), pace) == pytest.approx(1600.0 * 2**power)


def test_a_unit_measured_with_fewer_engines_is_estimated_per_engine():
    """A unit read back from before the spec gained engines took less than a unit of the spec
    will: the deadline counts its seconds per variant times the spec's variants."""
    from yolo_sm.core.grid import Pace

    old = [{"family": "yolov8", "width": 1.5, "batch": 64, "unit_s": 100.0, "variant": v}
           for v in ("a", "b")]  # fmt: skip
    pace = Pace(rows=list(old))
    assert bench._estimate(120.0, 4)(("yolov8", 1.5, 64), pace) == pytest.approx(200.0)
    assert bench._estimate(120.0)(("yolov8", 1.5, 64), pace) == pytest.approx(100.0)
    # a unit of the spec's variants counts as it took
    pace.rows += [{"family": "yolov8", "width": 1.0, "batch": 64, "unit_s": 150.0,
                   "variant": v} for v in "cdef"]  # fmt: skip
    assert bench._estimate(120.0, 4)(("yolov8", 1.0, 64), pace) == pytest.approx(150.0)
    # scaled to a wider unit from the per-variant seconds
    pace = Pace(rows=list(old))
    assert bench._estimate(120.0, 4)(("yolov8", 3.0, 64), pace) == pytest.approx(4 * 200.0)


def test_bench_with_no_time_for_its_first_unit_writes_nothing(tmp_path, fake_units):
    clock, calls = fake_units
    spec = bench.BenchSpec(models=(("yolov8", 0.25),), batches=(1,), device="cpu", est_unit_s=60)
    bench.run_bench(spec, tmp_path / "b.parquet", progress=False, deadline=clock.t + 30)
    assert calls == [] and not (tmp_path / "b.parquet").exists()


def test_a_model_that_cannot_be_built_is_error_rows(monkeypatch):
    spec = bench.BenchSpec(models=(("yolov8", 0.25),), batches=(4,), device="cpu", predict=False)
    rows = bench.bench_unit(RuntimeError("no\nmore"), "yolov8", 0.25, 4, spec, [])
    assert [r["variant"] for r in rows] == spec.variants()
    assert {r["status"] for r in rows} == {"error"} and rows[0]["message"] == "RuntimeError: no"
    assert all(r["vs_baseline"] is None for r in rows)


# --- the default command: what it runs, how it ranks, what it says to deploy ----------------

#: img/s of each default variant at batch 16 and 64 (made up, shaped like the H200's
#: bench_pipeline rows of width 0.5)
FAKE_RATES = {
    "eager/fp16/nhwc": (3500.0, 4000.0),
    "cudagraph/fp16/nhwc": (3700.0, 4100.0),
    "compile/fp16/nhwc": (4600.0, 7300.0),
    "compile:reduce-overhead/fp16/nhwc": (6500.0, 7350.0),
    "pipeline/compile/fp16/nhwc/graph/s1": (3900.0, 4650.0),
    "pipeline/compile/fp16/nhwc/graph/s4": (5900.0, 6500.0),
    "ultralytics_predict": (270.0, 250.0),
}


def test_the_default_bench_ranks_every_path_and_says_what_to_deploy_per_batch(
    tmp_path, capsys, monkeypatch
):
    """`yolo-sm bench --models yolov8:0.5 --batches 16,64` without engine flags runs the
    default candidates (BenchSpec's defaults, which the CLI's help states), prints them ranked
    and one line per batch naming the fastest frames-to-boxes path; the ratio it prints is the
    fastest pipeline's img/s over the fastest model-only engine's, recomputed here."""
    from yolo_sm.cli import measure

    seen = []

    def fake_unit(model, family, width, batch, spec, frames):
        seen.append((batch, tuple(spec.variants()), spec))
        rows = []
        for v in spec.variants():
            img = FAKE_RATES[v][0 if batch == 16 else 1]
            rows.append({"family": family, "width": width, "batch": batch, "variant": v,
                         "scope": bench._scope(v), "status": "ok", "message": "",
                         "median_ms": batch * 1e3 / img, "p99_ms": batch * 1.1e3 / img,
                         "img_per_s": img, "build_s": 1.0,
                         "model": f"{family}:{width:g}"})  # fmt: skip
        return rows

    monkeypatch.setattr(bench, "bench_unit", fake_unit)
    monkeypatch.setattr(bench, "bench_model", lambda family, width: object())
    monkeypatch.setattr(bench, "bundled_frames", lambda: [])
    monkeypatch.setattr(bench, "check_device", lambda name: None)
    monkeypatch.setattr(measure, "device", lambda name, *a: name)  # no GPU here
    out = tmp_path / "b.parquet"
    argv = ["bench", "--models", "yolov8:0.5", "--batches", "16,64", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    spec = seen[0][2]
    assert [b for b, _, _ in seen] == [16, 64] and spec.device == "cuda"
    assert list(seen[0][1]) == list(FAKE_RATES)  # the default candidates, in run order
    # the CLI's stated defaults (its flags are built from BenchStep) are the bench's
    d = BenchStep()
    assert list(d.engines) == [bench.variant_name(e) for e in spec.engines]
    assert d.pipeline_engine == bench.variant_name(spec.pipeline_engine)
    assert d.pipeline_streams == spec.pipeline_streams and d.pipeline_modes == spec.pipeline_modes
    assert d.seconds == spec.seconds and d.batches == bench.BenchSpec().batches
    # the quick plan's bench_deploy step is this very command
    from yolo_sm.contract.plans import load_plan

    plan = load_plan(Path(__file__).parents[1] / "data/plans/quick.yaml")
    (step,) = [s for s in plan.steps if s.name == "bench_deploy"]
    assert bench.BenchSpec.from_mapping({**step.params, "device": "cuda"}) == spec
    # the ratio printed per batch, recomputed with plain pandas from the table written
    df = pd.read_parquet(out)
    lines = [ln for ln in printed.splitlines() if ": deploy " in ln]
    assert len(lines) == 2
    for batch, line in zip((16, 64), lines, strict=True):
        u = df[df.batch == batch]
        pipe = u[u.variant.str.startswith("pipeline/")].sort_values("img_per_s").iloc[-1]
        best = u[u.scope == "model_only"].img_per_s.max()
        assert f"batch {batch} " in line and f"deploy {pipe.variant}," in line
        assert f"{pipe.img_per_s / best:.2f}x the fastest model-only engine" in line
        assert "compile:reduce-overhead/fp16/nhwc" in line
    for v in FAKE_RATES:  # the ranking lists every path
        assert v in printed


def ranked_unit(rates: dict, batch: int = 16, latency: dict | None = None):
    """A bench unit of ok rows: ``rates`` img/s per variant, latency per batch from them (or
    ``latency``), build seconds 1 (cudagraph: 0.5)."""
    lat = latency or {}
    return pd.DataFrame(
        [{"family": "yolov8", "width": 0.5, "batch": batch, "variant": v,
          "scope": bench._scope(v), "status": "ok", "img_per_s": r,
          "median_ms": lat.get(v, batch * 1e3 / r), "p99_ms": batch * 1e3 / r,
          "build_s": 0.5 if v.startswith("cudagraph") else 1.0} for v, r in rates.items()]
    )  # fmt: skip


def test_deploy_picks_the_fastest_frames_to_boxes_path_and_flips_with_it():
    from yolo_sm.topics.deploy import recommend as fr

    rates = {"eager/fp16/nhwc": 100.0, "compile/fp16/nhwc": 200.0,
             "pipeline/compile/fp16/nhwc/graph/s1": 150.0,
             "pipeline/compile/fp16/nhwc/graph/s3": 180.0, "ultralytics_predict": 10.0}  # fmt: skip
    b = ranked_unit(rates)
    r = fr.ranking(b)
    assert r.variant.tolist() == sorted(rates, key=rates.get, reverse=True)
    assert r["rank"].tolist() == [1, 2, 3, 4, 5]
    assert (r.vs_fastest_engine == r.img_per_s / 200.0).all()
    d = fr.deploy(fr.ranking(b)).iloc[0]
    assert (d.deploy, d.fastest_engine) == (
        "pipeline/compile/fp16/nhwc/graph/s3",
        "compile/fp16/nhwc",
    )
    assert d.vs_fastest_engine == pytest.approx(0.9) and d.predict_img_per_s == 10.0
    # s1 within NEAR of s3 and of lower latency: s1 (fewer batches in flight)
    queued = {"pipeline/compile/fp16/nhwc/graph/s3": 250.0}  # 3 batches in flight: queueing
    b = ranked_unit({**rates, "pipeline/compile/fp16/nhwc/graph/s1": 175.0}, latency=queued)
    assert fr.deploy(fr.ranking(b)).deploy.item() == "pipeline/compile/fp16/nhwc/graph/s1"
    # the latency regime: the lowest latency, whatever its img/s
    b = ranked_unit(rates, batch=1, latency=queued)
    assert fr.deploy(fr.ranking(b)).deploy.item() == "pipeline/compile/fp16/nhwc/graph/s1"
    # no frames-to-boxes row ran: the fastest engine, of those within NEAR the faster build
    engines_only = {"eager/fp16/nhwc": 100.0, "compile/fp16/nhwc": 200.0,
                    "cudagraph/fp16/nhwc": 195.0}  # fmt: skip
    d = fr.deploy(fr.ranking(ranked_unit(engines_only))).iloc[0]
    assert (d.deploy, d.scope) == ("cudagraph/fp16/nhwc", "model_only")
    assert "no frames-to-boxes path ran" in fr.deploy_line(d)
    # failed rows are not ranked; a unit without a model-only engine has no ratio
    b = ranked_unit(rates)
    b.loc[b.variant == "pipeline/compile/fp16/nhwc/graph/s3", "status"] = "error"
    assert fr.deploy(fr.ranking(b)).deploy.item() == "pipeline/compile/fp16/nhwc/graph/s1"
    frames_only = ranked_unit({k: v for k, v in rates.items() if "/" not in k or "pipe" in k})
    d = fr.deploy(fr.ranking(frames_only)).iloc[0]
    assert d.fastest_engine == "" and math.isnan(d.vs_fastest_engine)
    assert "the fastest model-only engine" not in fr.deploy_line(d)

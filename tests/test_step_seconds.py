"""GPU seconds per step: per-row phase columns, the manifest's gpu_seconds record (summed over
a resumable step's runs), collect --status's recorded and estimated seconds (CPU)."""

import json
import math
import time

import pandas as pd
import pytest
import yaml

from yolo_sm.cli.main import main
from yolo_sm.collect import plan_status, stopwatch
from yolo_sm.collect import plans as collect
from yolo_sm.contract import gpu_time
from yolo_sm.contract import plans as contract_plans
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.manifest import read_manifest, register
from yolo_sm.contract.store import read_arrow, write_atomic, write_table_atomic

SWEEP = {
    "family": "yolov8",
    "widths": [0.0625],
    "precisions": ["fp32"],
    "layouts": ["nchw"],
    "backends": ["eager"],
    "batches": [1, 2],
    "imgsz": [64],
    "budget_ms": 20,
    "warmup_ms": 2,
}


def _plan(tmp_path, steps):
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": steps}))
    return contract_plans.load_plan(p)


def _sweep_plan(tmp_path):
    return _plan(tmp_path, [{"name": "s", "kind": "sweep", "out": "s.parquet", "params": SWEEP}])


def test_a_cpu_plan_records_gpu_seconds_and_a_resumed_step_adds_its_runs(tmp_path):
    plan = _sweep_plan(tmp_path)
    out = tmp_path / "data"
    t0 = time.perf_counter()
    collect.run_plan(plan, out, progress=False)
    wall = time.perf_counter() - t0
    df = pd.read_parquet(out / "s.parquet")
    for c in ("build_s", "warmup_s", "timed_s", "profile_s"):
        assert (df[c] > 0).all(), c
    rec = read_manifest(out)["datasets"]["s"]["gpu_seconds"]
    assert rec["runs"] == 1
    phases = sum(rec[p] for p in gpu_time.PHASES)
    # the phases are the rows' own seconds; the total is the step's wall time, within the run's
    assert phases == pytest.approx(
        df[["build_s", "warmup_s", "timed_s", "profile_s"]].sum().sum(), rel=1e-3, abs=1e-2
    )
    assert phases <= rec["total"] <= wall
    assert rec["other"] == pytest.approx(rec["total"] - phases, abs=1e-2)
    table = plan_status.status(plan, out)
    assert table.gpu_s_source.tolist() == ["recorded"] and table.rows.tolist() == [2]
    assert table.gpu_s.iloc[0] == pytest.approx(rec["total"], abs=0.1)

    # one point lost: the step is partial, its rerun measures it and adds its seconds
    t = read_arrow(out / "s.parquet")
    write_table_atomic(t.slice(0, 1), out / "s.parquet")
    assert plan_status.step_state(plan.steps[0], plan, out) == "partial"
    collect.run_plan(plan, out, progress=False)
    rec2 = read_manifest(out)["datasets"]["s"]["gpu_seconds"]
    assert rec2["runs"] == 2 and rec2["total"] > rec["total"]
    assert rec2["build"] > rec["build"]


def test_a_partial_step_whose_first_run_recorded_nothing_is_estimated_whole(tmp_path):
    # a first run killed outright (SIGKILL) leaves its rows but no seconds: the run that
    # completes the table must not record its own seconds as the whole table's
    plan = _sweep_plan(tmp_path)
    out = tmp_path / "data"
    collect.run_plan(plan, out, progress=False)
    t = read_arrow(out / "s.parquet")
    write_table_atomic(t.slice(0, 1), out / "s.parquet")
    e = read_manifest(out)["datasets"]["s"]
    register(out, "s", "s.parquet", e["kind"], e["description"], e["command"], e["params"])
    assert "gpu_seconds" not in read_manifest(out)["datasets"]["s"]
    assert plan_status.step_state(plan.steps[0], plan, out) == "partial"
    collect.run_plan(plan, out, progress=False)
    entry = read_manifest(out)["datasets"]["s"]
    assert entry["rows"] == 2 and "gpu_seconds" not in entry
    df = pd.read_parquet(out / "s.parquet")
    table = plan_status.status(plan, out)
    assert table.gpu_s_source.tolist() == ["estimated (rows)"]
    phases = df[["build_s", "warmup_s", "timed_s", "profile_s"]].sum().sum()
    assert table.gpu_s.iloc[0] == pytest.approx(phases, abs=0.1)


def test_a_step_registered_again_keeps_its_recorded_seconds(tmp_path):
    plan = _sweep_plan(tmp_path)
    out = tmp_path / "data"
    collect.run_plan(plan, out, progress=False)
    rec = read_manifest(out)["datasets"]["s"]["gpu_seconds"]
    (out / "manifest.json").unlink()  # lost: rebuilt from the table's own registration
    assert plan_status.step_state(plan.steps[0], plan, out) == "unregistered"
    collect.run_plan(plan, out, progress=False)
    assert read_manifest(out)["datasets"]["s"]["gpu_seconds"] == rec


def _old_sweep(out, status=("ok", "ok", "oom")):
    """A sweep table as measured before the phase columns and records existed."""
    df = pd.DataFrame(
        {
            "family": "yolov8", "scale": "", "width": [0.25, 0.5, 1.0], "depth": 0.33,
            "max_channels": 2048, "precision": "fp16", "layout": "nhwc", "backend": "eager",
            "batch": 1, "imgsz": 640, "compile_mode": "default", "device": "cuda",
            "status": list(status), "message": "", "flops_per_img": 1.0, "median_ms": 1.0,
            "iqr_ms": 0.1, "min_ms": 0.9, "img_per_s": 1000.0, "tflops": 1.0, "rel_err": 0.0,
            "samples_ms": [[1.0]] * 3, "noisy": False, "bn_calibrated": True,
            "build_s": [2.0, 3.0, 4.0],
        }
    )  # fmt: skip
    write_atomic(df, out / "old.parquet")
    register(out, "old", "old.parquet", "sweep", "old", "cmd")


def test_status_estimates_the_seconds_of_tables_collected_before_they_were_recorded(tmp_path):
    out = tmp_path / "data"
    out.mkdir()
    _old_sweep(out)
    plan = _plan(
        tmp_path,
        [
            {"name": "old", "kind": "sweep", "out": "old.parquet",
             "params": {"widths": [0.25, 0.5, 1.0], "budget_ms": 200, "warmup_ms": 50}},
            {"name": "prof", "kind": "ceilings", "out": "prof.parquet", "est_s": 40},
            {"name": "gone", "kind": "ceilings", "out": "gone.parquet", "est_s": 99},
        ],
    )  # fmt: skip
    write_atomic(
        pd.DataFrame({"ceiling": ["x"], "value": [1.0], "unit": ["u"], "median_ms": [1.0]}),
        out / "prof.parquet",
    )
    register(out, "prof", "prof.parquet", "ceilings", "c", "cmd", gpu_seconds=None)
    table = plan_status.status(plan, out).set_index("step")
    # builds 2 + 3 + 4 s, and (50 + 200) ms of warm-up and budget for each of the 2 ok rows
    assert table.loc["old", "gpu_s"] == pytest.approx(9.5)
    assert table.loc["old", "gpu_s_source"].startswith("estimated")
    assert table.loc["prof", "gpu_s"] == 40 and table.loc["prof", "gpu_s_source"].startswith(
        "estimated"
    )
    assert math.isnan(table.loc["gone", "gpu_s"]) and table.loc["gone", "gpu_s_source"] == ""
    # one recorded step beside the estimated ones: the totals add both
    register(out, "prof", "prof.parquet", "ceilings", "c", "cmd",
             gpu_seconds={"timed": 5.0, "other": 1.0, "total": 6.0})  # fmt: skip
    table = plan_status.status(plan, out)
    totals = plan_status.gpu_totals(table)
    assert totals == {"recorded": 6.0, "estimated": 9.5, "total": 15.5, "tables": 2}


@pytest.mark.parametrize(
    "bad",
    [
        "12",
        {"total": -1.0},
        {"total": float("nan")},
        {"total": 1.0, "build": 2.0},
        {"total": 1.0, "colour": 1.0},
        {"total": 1.0, "runs": 0},
        {"total": True},
    ],
)
def test_bad_gpu_seconds_are_one_clear_error(tmp_path, bad):
    with pytest.raises(UserError, match="gpu_seconds"):
        gpu_time.check_gpu_seconds(bad, "dataset x")
    out = tmp_path / "data"
    out.mkdir()
    _old_sweep(out)
    with pytest.raises(UserError, match="gpu_seconds"):
        register(out, "old", "old.parquet", "sweep", "old", "cmd", gpu_seconds=bad)
    mf = out / "manifest.json"
    m = json.loads(mf.read_text())
    m["datasets"]["old"]["gpu_seconds"] = bad
    mf.write_text(json.dumps(m))
    plan = _plan(tmp_path, [{"name": "old", "kind": "sweep", "out": "old.parquet"}])
    with pytest.raises(UserError, match="old gpu_seconds"):
        plan_status.status(plan, out)
    assert main(["collect", "--plan", str(tmp_path / "plan.yaml"), "--out", str(out),
                 "--status"]) == 2  # fmt: skip


def test_records_add_up_and_other_is_the_rest():
    a = gpu_time.record({"build": 1.0, "timed": 2.0}, 5.0)
    assert a["other"] == pytest.approx(2.0) and a["total"] == 5.0 and a["runs"] == 1
    b = gpu_time.add(a, gpu_time.record({"warmup": 0.5}, 0.2))  # total never below its phases
    assert b["total"] == pytest.approx(5.5) and b["warmup"] == 0.5 and b["runs"] == 2
    assert gpu_time.check_gpu_seconds(b, "x") == b


def test_nested_phases_count_once_and_credit_adds_outside_phases():
    with stopwatch.ledger() as led:
        with stopwatch.phase("build") as outer:
            with stopwatch.phase("warmup") as inner:
                time.sleep(0.02)
            stopwatch.credit("timed", 100.0)  # inside a phase: already counted by it
        stopwatch.credit("profile", 3.0)
    rec = led.record()
    assert inner.seconds >= 0.02 and outer.seconds >= inner.seconds
    assert rec["build"] == pytest.approx(outer.seconds, abs=1e-3)
    assert rec["warmup"] == 0.0 and rec["timed"] == 0.0 and rec["profile"] == 3.0
    assert rec["total"] >= rec["build"] + rec["profile"]
    with pytest.raises(ValueError):
        with stopwatch.phase("coffee"):
            pass


def test_an_engine_build_is_the_build_phase_once_wherever_it_is_called():
    torch = pytest.importorskip("torch")
    from yolo_sm.collect.engines import EngineConfig, build_engine

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.SiLU()).eval()
    cfg = EngineConfig(
        backend="eager", precision="fp32", layout="nchw", device="cpu", batch=1, imgsz=32
    )
    with stopwatch.ledger() as alone:
        build_engine(model, cfg).close()
    assert alone.phases["build"] > 0
    assert alone.phases["build"] <= alone.record()["total"] + 1e-3  # the record rounds to ms
    with stopwatch.ledger() as nested:  # inside a caller's profile phase: counted there, once
        with stopwatch.phase("profile") as outer:
            build_engine(model, cfg).close()
    assert nested.phases["build"] == 0
    assert nested.phases["profile"] == pytest.approx(outer.seconds)


def test_the_phase_line_sums_the_records_and_gives_each_phase_its_share():
    a = gpu_time.record({"build": 6.0, "timed": 2.0}, 10.0)
    b = gpu_time.record({"build": 2.0, "profile": 2.0}, 10.0)
    line = gpu_time.phase_line([a, b])
    assert line.startswith("recorded GPU time by phase (2 runs):")
    assert "build 8 s (40 %)" in line and "timed 2 s (10 %)" in line
    assert "profile 2 s (10 %)" in line and "other 8 s (40 %)" in line
    assert gpu_time.phase_line([]) == ""


def test_status_prints_where_the_recorded_seconds_went(tmp_path, capsys):
    plan = _sweep_plan(tmp_path)
    out = tmp_path / "data"
    collect.run_plan(plan, out, progress=False)
    capsys.readouterr()
    assert (
        main(["collect", "--plan", str(tmp_path / "plan.yaml"), "--out", str(out), "--status"]) == 0
    )
    printed = capsys.readouterr().out
    assert "recorded GPU time by phase (1 runs): build " in printed


def test_a_record_of_one_run_is_kept_whole():
    rec = gpu_time.record({"build": 6.0, "timed": 2.0}, 10.0)
    assert gpu_time.held_by_rows(rec, {"build": 1.0, "timed": 1.0}) == (rec, 0.0)


@pytest.mark.parametrize(
    "rows, kept_total, gone",
    [
        # the rows hold every phase second the runs recorded: nothing left out
        ({"build": 8.0, "warmup": 0.0, "timed": 4.0, "profile": 0.0}, 20.0, 0.0),
        # half the phase seconds were units measured again: half the overhead with them
        ({"build": 4.0, "warmup": 0.0, "timed": 2.0, "profile": 0.0}, 10.0, 10.0),
        # rows that count more than the record (a shared build on several rows): capped
        ({"build": 9.0, "warmup": 0.0, "timed": 4.0, "profile": 0.0}, 20.0, 0.0),
        # a phase the rows have no column of is kept whole
        ({"build": 4.0}, 8.0 + 8.0 * 8 / 12, 12.0 - 8.0 * 8 / 12),
    ],
)
def test_a_record_of_several_runs_keeps_what_made_the_tables_rows(rows, kept_total, gone):
    two = gpu_time.add(
        gpu_time.record({"build": 4.0, "timed": 2.0}, 10.0),
        gpu_time.record({"build": 4.0, "timed": 2.0}, 10.0),
    )
    rec, left_out = gpu_time.held_by_rows(two, rows)
    assert rec["total"] == pytest.approx(kept_total, abs=1e-3)
    assert left_out == pytest.approx(gone, abs=1e-3)
    assert rec["runs"] == 2
    assert sum(rec[p] for p in (*gpu_time.PHASES, "other")) == pytest.approx(rec["total"])
    assert gpu_time.check_gpu_seconds(rec, "kept") == rec


def test_status_counts_the_seconds_of_the_rows_a_step_holds_not_of_its_runs(tmp_path, capsys):
    """A unit measured twice (a second run redoing the table's rows) costs the record twice;
    --status and the snapshot count it once and say what they left out."""
    from yolo_sm.collect import collection_time

    plan = _sweep_plan(tmp_path)
    out = tmp_path / "data"
    collect.run_plan(plan, out, progress=False)
    once = plan_status.status(plan, out).gpu_s.iloc[0]
    rec = read_manifest(out)["datasets"]["s"]["gpu_seconds"]
    # the same points measured again by a second run: its seconds added, its rows replacing
    entry = read_manifest(out)["datasets"]["s"]
    register(out, "s", "s.parquet", entry["kind"], entry["description"], entry["command"],
             entry["params"], gpu_seconds=gpu_time.add(rec, rec))  # fmt: skip
    assert read_manifest(out)["datasets"]["s"]["gpu_seconds"]["runs"] == 2
    table = plan_status.status(plan, out)
    assert table.gpu_s_source.tolist() == ["recorded"]
    assert table.gpu_s.iloc[0] == pytest.approx(once, abs=0.2)
    snap = collection_time.table(plan, out, table)
    assert snap.spent_s.iloc[0] == pytest.approx(rec["total"], abs=0.01)
    assert snap.superseded_s.iloc[0] == pytest.approx(rec["total"], abs=0.01)
    assert snap.runs.iloc[0] == 2
    capsys.readouterr()
    assert (
        main(["collect", "--plan", str(tmp_path / "plan.yaml"), "--out", str(out), "--status"]) == 0
    )
    printed = capsys.readouterr().out
    assert "recorded GPU time by phase (2 runs)" in printed
    assert f"not counted: {rec['total']:.0f} s the records hold" in printed

"""Sweeps: spec parsing, point order, CPU runs, resume, failures as rows, atomic writes, SIGKILL."""

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

import yolo_sm.core.sweep
from yolo_sm.contract.errors import UserError
from yolo_sm.core import sweep
from yolo_sm.core.sweep import KEY_COLUMNS, SweepSpec, is_oom, run_sweep, write_atomic

ROOT = Path(__file__).resolve().parents[1]

TINY = dict(
    family="yolov8",
    widths="0.0625",
    precisions="fp32,bf16",
    layouts="nchw",
    backends="eager",
    batches="1,2",
    imgsz=64,
    budget_ms=20,
    warmup_ms=5,
    device="cpu",
)


def tiny_spec(**over):
    return SweepSpec.from_mapping({**TINY, **over})


def partials(folder: Path):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".partial", ".probe")))


# --- SweepSpec ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, field, expected",
    [
        ({"widths": "0.25, 0.5,s"}, "widths", (0.25, 0.5, "s")),
        ({"widths": [0.25, "S", "1"]}, "widths", (0.25, "s", 1.0)),
        ({"widths": 0.5}, "widths", (0.5,)),
        ({"batches": "1,2,4"}, "batches", (1, 2, 4)),
        ({"batches": [1, "8", 2.0]}, "batches", (1, 8, 2)),
        ({"batches": "4,1,4"}, "batches", (4, 1, 4)),
        ({"precisions": "FP32, bf16,fp32"}, "precisions", ("fp32", "bf16")),
        ({"layouts": ["NHWC", "nchw"]}, "layouts", ("nhwc", "nchw")),
        ({"backends": "eager,onnxruntime"}, "backends", ("eager", "onnxruntime")),
        ({"family": "yolov8,yolo11"}, "family", ("yolov8", "yolo11")),
        ({"imgsz": 64}, "imgsz", (64,)),
        ({"imgsz": "64,128"}, "imgsz", (64, 128)),
        ({"depth": "none,0.5"}, "depth", (None, 0.5)),
        ({"budget_ms": "20"}, "budget_ms", 20.0),
        ({"warmup_ms": 0}, "warmup_ms", 0.0),
        ({"max_channels": "512"}, "max_channels", 512),
        ({"device": "cpu"}, "device", "cpu"),
        ({"compile_mode": "max-autotune"}, "compile_mode", "max-autotune"),
        ({"widths": None}, "widths", (1.0,)),  # None keeps the default
    ],
)
def test_from_mapping_parses(data, field, expected):
    spec = SweepSpec.from_mapping(data)
    got = getattr(spec, field)
    assert got == expected
    if isinstance(expected, tuple):
        assert [type(x) for x in got] == [type(x) for x in expected]


@pytest.mark.parametrize(
    "data",
    [
        {"widht": 0.25},
        {"out_file": "x.parquet"},
        {"widths": "abc"},
        {"widths": 0},
        {"widths": "-1"},
        {"widths": 5},
        {"widths": "nan"},
        {"widths": ""},
        {"batches": "0"},
        {"batches": "-1"},
        {"batches": "1.5"},
        {"batches": "x"},
        {"batches": ""},
        {"imgsz": 65},
        {"imgsz": 0},
        {"imgsz": "big"},
        {"precisions": "fp4"},
        {"precisions": []},
        {"layouts": "nwhc"},
        {"backends": "tf"},
        {"family": "yolov5"},
        {"device": "tpu"},
        {"compile_mode": "fast"},
        {"budget_ms": 0},
        {"budget_ms": "nan"},
        {"budget_ms": "x"},
        {"warmup_ms": -1},
        {"max_channels": 0},
        {"max_channels": "1.5"},
        {"depth": 5},
        {"depth": 0},
    ],
)
def test_from_mapping_rejects(data):
    with pytest.raises(UserError):
        SweepSpec.from_mapping(data)


def test_points_order_groups_by_model_then_engine_then_batch():
    spec = SweepSpec.from_mapping(
        dict(
            family="yolov8,yolo11",
            widths="0.125,0.0625",
            precisions="fp32,bf16",
            layouts="nchw,nhwc",
            backends="eager",
            batches="1,2,1",
            imgsz=64,
            device="cpu",
        )
    )
    pts = spec.points()
    assert len(pts) == 2 * 2 * 2 * 2 * 2  # duplicate batch dropped
    assert len(set(pts)) == len(pts)
    models = [k for k, _ in itertools.groupby(pts, key=lambda p: p.model_key())]
    assert models == [
        ("yolov8", "", 0.125, 0.33, 2048),
        ("yolov8", "", 0.0625, 0.33, 2048),
        ("yolo11", "", 0.125, 0.33, 2048),
        ("yolo11", "", 0.0625, 0.33, 2048),
    ]
    engines = [
        k
        for k, _ in itertools.groupby(
            pts, key=lambda p: (p.model_key(), p.precision, p.layout, p.backend)
        )
    ]
    assert len(engines) == 4 * 4  # each engine's points are contiguous
    assert [(p.precision, p.layout, p.batch) for p in pts[:8]] == [
        ("fp32", "nchw", 1),
        ("fp32", "nchw", 2),
        ("fp32", "nhwc", 1),
        ("fp32", "nhwc", 2),
        ("bf16", "nchw", 1),
        ("bf16", "nchw", 2),
        ("bf16", "nhwc", 1),
        ("bf16", "nhwc", 2),
    ]


def test_points_preset_width():
    (p,) = SweepSpec.from_mapping(
        dict(widths="s", precisions="fp32", layouts="nchw", device="cpu")
    ).points()
    assert (p.scale, p.width, p.depth, p.max_channels) == ("s", 0.5, 0.33, 1024)
    (q,) = SweepSpec.from_mapping(
        dict(widths="s", depth="0.5", precisions="fp32", layouts="nchw", device="cpu")
    ).points()
    assert q.depth == 0.5


# spec (on top of one width/batch), expected (backend, precision, layout) set, unsupported lines
@pytest.mark.parametrize(
    "over, kept, dropped",
    [
        (
            dict(
                backends="eager,onnxruntime", precisions="fp32,fp16", layouts="nchw", device="cpu"
            ),
            {("eager", "fp32", "nchw"), ("eager", "fp16", "nchw"), ("onnxruntime", "fp32", "nchw")},
            ["onnxruntime/fp16/nchw: onnxruntime runs fp32 only"],
        ),
        (
            dict(backends="onnxruntime", precisions="fp32", layouts="nchw,nhwc", device="cpu"),
            {("onnxruntime", "fp32", "nchw")},
            ["onnxruntime/fp32/nhwc: onnxruntime picks its own layouts (run it with nchw input)"],
        ),
        (
            dict(backends="eager,cudagraph", precisions="fp32", layouts="nchw", device="cpu"),
            {("eager", "fp32", "nchw")},
            ["cudagraph/fp32/nchw: cudagraph needs a CUDA device"],
        ),
        (
            dict(backends="eager,cudagraph", precisions="fp32,tf32", layouts="nchw", device="cuda"),
            {
                ("eager", "fp32", "nchw"),
                ("eager", "tf32", "nchw"),
                ("cudagraph", "fp32", "nchw"),
                ("cudagraph", "tf32", "nchw"),
            },
            [],
        ),
        (
            dict(backends="eager,compile", precisions="tf32,int8", layouts="nchw", device="cpu"),
            {("eager", "int8", "nchw"), ("compile", "int8", "nchw")},
            [
                "eager/tf32/nchw: tf32 exists only on a GPU",
                "compile/tf32/nchw: tf32 exists only on a GPU",
            ],
        ),
        (
            dict(backends="tensorrt", precisions="fp16,bf16,int8", layouts="nchw", device="cuda"),
            {("tensorrt", "fp16", "nchw"), ("tensorrt", "int8", "nchw")},
            ["tensorrt/bf16/nchw: tensorrt engines here are fp32/fp16/int8"],
        ),
    ],
)
def test_points_drop_unsupported(over, kept, dropped):
    spec = SweepSpec.from_mapping(dict(widths="0.25", batches="1", imgsz=64, **over))
    assert {(p.backend, p.precision, p.layout) for p in spec.points()} == kept
    assert spec.unsupported() == dropped


# --- running on the CPU ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "tiny.parquet"
    df = run_sweep(tiny_spec(), out, progress=False)
    return out, df


def test_run_sweep_writes_one_row_per_point(tiny_run):
    out, returned = tiny_run
    df = pd.read_parquet(out)
    assert len(df) == len(returned) == 4
    assert (df.check_input == "photos").all()  # the numerical check's input (engines.base.verify)
    assert list(df.columns[: len(KEY_COLUMNS) + 2]) == [*KEY_COLUMNS, "status", "message"]
    for col in (
        *KEY_COLUMNS,
        "status",
        "message",
        "samples_ms",
        "median_ms",
        "iqr_ms",
        "img_per_s",
        "rel_err",
        "flops_per_img",
        "tflops",
        "build_s",
        "prov_torch",
    ):
        assert col in df.columns, col
    assert (df.status == "ok").all() and (df.message == "").all()
    assert sorted(zip(df.precision, df.batch, strict=True)) == [
        ("bf16", 1),
        ("bf16", 2),
        ("fp32", 1),
        ("fp32", 2),
    ]
    assert not df[list(KEY_COLUMNS)].duplicated().any()
    for _, row in df.iterrows():
        samples = list(row.samples_ms)
        assert len(samples) == row.n_samples >= 5
        assert row.median_ms == pytest.approx(pd.Series(samples).median())
        assert row.img_per_s == pytest.approx(row.batch * 1000 / row.median_ms)
        assert row.rel_err <= (1e-3 if row.precision == "fp32" else 1e-1)
        assert row.flops_per_img > 0
        assert row.prov_torch == torch.__version__
    assert df.groupby("precision").rel_err.max()["bf16"] > 1e-6
    assert df.flops_per_img.nunique() == 1
    assert partials(out.parent) == []
    # what the host decided: on a CPU the host is the device (no launches, no GPU busy time)
    assert (df.host_cpu_ms > 0).all() and (df.launches_per_forward == 0).all()
    assert df.gpu_busy_fraction.isna().all() and not df.host_bound.any()
    assert df.host_launch_us.isna().all()


def test_rerun_adds_nothing_and_builds_nothing(tiny_run, monkeypatch):
    out, _ = tiny_run
    before = out.read_bytes()

    def boom(*a, **k):
        raise AssertionError("a done point was run again")

    monkeypatch.setattr(sweep, "run_point", boom)
    monkeypatch.setattr(sweep, "build_model", boom)
    df = run_sweep(tiny_spec(), out, progress=False)
    assert len(df) == 4
    assert out.read_bytes() == before


def test_resume_runs_only_missing_points(tiny_run, tmp_path, monkeypatch):
    src, _ = tiny_run
    out = tmp_path / "part.parquet"
    done = pd.read_parquet(src)
    write_atomic(done.iloc[:3], out)
    ran = []

    def fake_point(model, p, spec, flops):
        ran.append(p)
        return {
            **p.__dict__,
            "status": "ok",
            "message": "",
            "flops_per_img": flops,
            "samples_ms": [1.0, 2.0],
            "median_ms": 1.5,
        }

    monkeypatch.setattr(sweep, "run_point", fake_point)
    df = run_sweep(tiny_spec(), out, progress=False)
    assert [(p.precision, p.batch) for p in ran] == [(done.precision[3], done.batch[3])]
    back = pd.read_parquet(out)
    assert len(back) == 4 and not back[list(KEY_COLUMNS)].duplicated().any()
    assert back.median_ms.iloc[:3].tolist() == done.median_ms.iloc[:3].tolist()  # kept as is
    assert list(back.samples_ms.iloc[3]) == [1.0, 2.0]
    assert len(df) == 4


def _failing_build_engine(exc):
    real = yolo_sm.core.sweep.build_engine

    def build(model, config):
        if config.batch == 2:
            raise exc
        return real(model, config)

    return build


@pytest.mark.parametrize(
    "exc, status, message",
    [
        (
            torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
            "oom",
            "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ),
        (
            RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
            "oom",
            "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        ),
        (RuntimeError("boom\nsecond line"), "error", "RuntimeError: boom"),
        (ValueError("x" * 600), "error", ("ValueError: " + "x" * 600)[:500]),
    ],
)
def test_engine_failure_becomes_a_row(tmp_path, monkeypatch, exc, status, message):
    monkeypatch.setattr(yolo_sm.core.sweep, "build_engine", _failing_build_engine(exc))
    out = tmp_path / "fail.parquet"
    df = run_sweep(tiny_spec(precisions="fp32", budget_ms=5, warmup_ms=1), out, progress=False)
    back = pd.read_parquet(out)
    assert len(df) == len(back) == 2
    ok, bad = back[back.batch == 1].iloc[0], back[back.batch == 2].iloc[0]
    assert ok.status == "ok" and ok.median_ms > 0 and ok.message == ""
    assert bad.status == status
    assert bad.message == message
    assert pd.isna(bad.median_ms) and bad.flops_per_img == ok.flops_per_img
    assert bad.build_s >= 0  # the failed build's seconds are kept: they were spent
    assert partials(tmp_path) == []


def test_model_build_failure_becomes_error_rows(tmp_path, monkeypatch):
    def broken(p):
        raise RuntimeError("bad model config")

    monkeypatch.setattr(sweep, "build_model", broken)
    df = run_sweep(tiny_spec(), tmp_path / "m.parquet", progress=False)
    assert len(df) == 4
    assert (df.status == "error").all()
    assert (df.message == "RuntimeError: bad model config").all()


@pytest.mark.parametrize(
    "exc, expected",
    [
        (torch.OutOfMemoryError("CUDA out of memory"), True),
        (torch.cuda.OutOfMemoryError("x"), True),
        (RuntimeError("CUDNN_STATUS_ALLOC_FAILED"), True),
        (RuntimeError("cudnn_status_alloc_failed while planning"), True),
        (RuntimeError("CUDA error: out of memory"), True),
        (RuntimeError("[TRT] Out of memory allocating 1 GiB"), True),
        (RuntimeError("CUDA error: an illegal memory access was encountered"), False),
        (ValueError("boom"), False),
    ],
)
def test_is_oom(exc, expected):
    assert is_oom(exc) is expected


# --- output files ---------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"not a parquet file", b"", b"PAR1\x00\x00PAR1"])
def test_corrupt_output_is_left_untouched(tmp_path, content, monkeypatch):
    out = tmp_path / "bad.parquet"
    out.write_bytes(content)
    monkeypatch.setattr(sweep, "build_model", lambda p: pytest.fail("should not build"))
    with pytest.raises(UserError, match="not a readable parquet"):
        run_sweep(tiny_spec(), out, progress=False)
    assert out.read_bytes() == content
    assert partials(tmp_path) == []


def test_foreign_parquet_is_rejected(tmp_path):
    out = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(out)
    before = out.read_bytes()
    with pytest.raises(UserError, match="not a yolo_sm sweep table"):
        run_sweep(tiny_spec(), out, progress=False)
    assert out.read_bytes() == before


def test_write_atomic(tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "t.parquet"
    df = pd.DataFrame({"a": [1, 2], "s": [[1.0], [2.0, 3.0]]})
    write_atomic(df, out, {"spec": {"x": 1}})
    write_atomic(df.iloc[:1], out, {"spec": {"x": 2}})  # replaces the old file
    back = pd.read_parquet(out)
    assert back.a.tolist() == [1] and list(back.s[0]) == [1.0]
    assert b'"x": 2' in pq.read_schema(out).metadata[b"yolo_sm"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_write_atomic_failure_keeps_old_file(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    out = tmp_path / "t.parquet"
    write_atomic(pd.DataFrame({"a": [1]}), out)
    before = out.read_bytes()

    def disk_full(table, where, **kw):
        where.write(b"half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", disk_full)
    with pytest.raises(OSError):
        write_atomic(pd.DataFrame({"a": [1, 2]}), out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_stale_partials_of_dead_writers_are_removed(tmp_path, monkeypatch):
    out = tmp_path / "s.parquet"
    pid_max = (
        int(Path("/proc/sys/kernel/pid_max").read_text())
        if Path("/proc/sys/kernel/pid_max").exists()
        else 4_194_304
    )
    dead = tmp_path / f".s.parquet.{pid_max + 1}.partial"  # no process can have this id
    alive = tmp_path / f".s.parquet.{os.getpid()}.partial"
    other = tmp_path / f".other.parquet.{pid_max + 1}.partial"
    monkeypatch.setattr(sweep, "run_point", lambda *a: pytest.fail("should not run"))
    write_atomic(pd.DataFrame([{**p.__dict__, "status": "ok"} for p in tiny_spec().points()]), out)
    for p in (dead, alive, other):
        p.write_bytes(b"x")
    run_sweep(tiny_spec(), out, progress=False)
    assert not dead.exists()
    assert alive.exists() and other.exists()  # a live writer's file, another table's file


# --- a sweep killed with SIGKILL resumes ----------------------------------------------------

KILL_ARGS = [
    "sweep",
    "--device",
    "cpu",
    "--family",
    "yolov8",
    "--widths",
    "0.0625,0.125",
    "--precisions",
    "fp32",
    "--layouts",
    "nchw,nhwc",
    "--backends",
    "eager",
    "--batches",
    "1,2,3",
    "--imgsz",
    "64",
    "--budget-ms",
    "200",
    "--warmup-ms",
    "5",
    "--quiet",
]


def _rows(out: Path) -> int:
    try:
        return len(pd.read_parquet(out))
    except Exception:  # noqa: BLE001 - not there yet
        return 0


@pytest.mark.timeout(180)
def test_sigkill_then_resume(tmp_path):
    out = tmp_path / "kill.parquet"
    env = {**os.environ, "YOLO_SM_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "yolo_sm", *KILL_ARGS, "--out", str(out)]
    log = tmp_path / "first.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
        sent = False
        try:
            deadline = time.monotonic() + 150
            while proc.poll() is None and time.monotonic() < deadline:
                if out.exists() and _rows(out) >= 2:
                    os.kill(proc.pid, signal.SIGKILL)
                    sent = True
                    break
                time.sleep(0.02)
        finally:
            if not sent and proc.poll() is None:
                proc.kill()  # past the deadline: do not leave it running
            rc = proc.wait(timeout=30)
    assert rc == -signal.SIGKILL, f"sweep ended before the kill (rc {rc}): {log.read_text()}"
    killed = pd.read_parquet(out)  # always complete thanks to the atomic rename
    assert 2 <= len(killed) < 12

    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150)
    assert res.returncode == 0, res.stderr
    df = pd.read_parquet(out)
    assert len(df) == 12
    keys = df[list(KEY_COLUMNS)]
    assert not keys.duplicated().any()
    expected = {
        p.key()
        for p in SweepSpec.from_mapping(
            dict(
                family="yolov8",
                widths="0.0625,0.125",
                precisions="fp32",
                layouts="nchw,nhwc",
                backends="eager",
                batches="1,2,3",
                imgsz=64,
                device="cpu",
            )
        ).points()
    }
    assert {tuple(r) for r in keys.itertuples(index=False)} == expected
    assert (df.status == "ok").all()
    # the rows timed before the kill are kept, not timed again
    first = killed.set_index(list(KEY_COLUMNS)).median_ms
    assert df.set_index(list(KEY_COLUMNS)).median_ms.loc[first.index].tolist() == first.tolist()
    assert partials(tmp_path) == []


def test_engine_info_reaches_the_row(tmp_path, monkeypatch):
    """A backend's build details (a CUDA graph's capture time and private pool, ...) become
    columns of its row; an engine without them leaves the columns empty."""
    real = yolo_sm.core.sweep.build_engine

    def build(model, config):
        eng = real(model, config)
        if config.batch == 2:
            eng.info.update(capture_s=0.25, graph_pool_bytes=123_456_789)
        return eng

    monkeypatch.setattr(yolo_sm.core.sweep, "build_engine", build)
    out = tmp_path / "info.parquet"
    run_sweep(tiny_spec(precisions="fp32", budget_ms=5, warmup_ms=1), out, progress=False)
    back = pd.read_parquet(out).set_index("batch")
    assert back.loc[2, "graph_pool_bytes"] == 123_456_789 and back.loc[2, "capture_s"] == 0.25
    assert pd.isna(back.loc[1, "graph_pool_bytes"])


def _ten_second_points(monkeypatch, **row):
    """A fake clock that each of two widths' points (2 each, fp32) moves by 10 s, and that
    spec; ``row``: values the points' rows say (their phase seconds)."""
    clock = {"t": 0.0}
    monkeypatch.setattr(sweep.time, "monotonic", lambda: clock["t"])
    real = sweep.run_point

    def ten_seconds_each(*a, **kw):
        clock["t"] += 10.0  # every point "takes" 10 s
        return {**real(*a, **kw), **row}

    monkeypatch.setattr(sweep, "run_point", ten_seconds_each)
    return clock, tiny_spec(widths=[0.0625, 0.125], precisions="fp32", budget_ms=2, warmup_ms=1)


def test_deadline_keeps_a_models_points_together(tmp_path, monkeypatch):
    """With a deadline, a model (width) starts only if all its points fit at the run's pace, so
    that its points are measured side by side; the next run measures the skipped model whole."""
    clock, spec = _ten_second_points(monkeypatch)
    out = tmp_path / "d.parquet"
    # 2 points per width: the first width takes 20 s; the second needs 20 more, 15 are left
    df = run_sweep(spec, out, progress=False, deadline=35.0)
    assert sorted(set(df.width)) == [0.0625] and len(df) == 2
    # enough time: the second width runs whole
    clock["t"] = 0.0
    df = run_sweep(spec, out, progress=False, deadline=100.0)
    assert len(df) == 4 and (df[df.width == 0.125].status == "ok").all()


def _pace_row(width, seconds, **over):
    row = dict(
        family="yolov8", model=float("nan"), precision="fp32", layout="nchw", backend="eager",
        batch=8, imgsz=640, status="ok", width=width, build_s=seconds, warmup_s=0.0,
        timed_s=0.0, profile_s=0.0,
    )  # fmt: skip
    return {**row, **over}


def _pace_point(width, **over):
    base = dict(
        family="yolov8", scale="", width=width, depth=0.33, max_channels=1024, precision="fp32",
        layout="nchw", backend="eager", batch=8, imgsz=640, compile_mode="default",
        device="cuda",
    )  # fmt: skip
    return sweep.Point(**{**base, **over})


def test_a_wider_models_points_are_estimated_from_the_nearest_width_scaled_by_its_square():
    from yolo_sm.core.grid import Pace

    rows = [_pace_row(0.5, 2.0), _pace_row(1.0, 10.0), _pace_row(1.0, 99.0, batch=64)]
    pace = Pace(rows=rows, seconds=[1.0, 1.0])
    # width 2.0: the width-1.0 row of the same batch, 4x (its FLOPs)
    assert sweep.point_pace(_pace_point(2.0), pace) == pytest.approx(40.0)
    # narrower or equal: the nearest row's own seconds, not scaled down
    assert sweep.point_pace(_pace_point(0.75), pace) == pytest.approx(10.0)  # tie: the wider
    assert sweep.point_pace(_pace_point(0.25), pace) == pytest.approx(2.0)
    # never below this run's mean pace (what the phases miss: the model's own build)
    assert sweep.point_pace(_pace_point(0.25), Pace(rows=rows, seconds=[5.0])) == 5.0
    # no row of its precision / batch / model, or rows without phase columns: the mean pace
    assert sweep.point_pace(_pace_point(2.0, precision="fp16"), pace) == 1.0
    assert sweep.point_pace(_pace_point(2.0, model="m.yaml"), pace) == 1.0
    old = [{k: v for k, v in r.items() if k != "profile_s"} for r in rows]
    assert sweep.point_pace(_pace_point(2.0), Pace(rows=old, seconds=[3.0])) == 3.0
    failed = [_pace_row(1.0, 10.0, status="error")]
    assert sweep.point_pace(_pace_point(2.0), Pace(rows=failed)) == 0.0  # a run always starts


def test_deadline_holds_back_a_wider_model_whose_rows_say_it_does_not_fit(tmp_path, monkeypatch):
    """The first width's points took 10 s each (their phase columns say so); the second, twice
    as wide, needs 4 x 10 s per point by its FLOPs: with 60 s left it does not start, though the
    run's mean pace (10 s a point, 20 s in all) would have started it and cut it half-measured."""
    clock, spec = _ten_second_points(
        monkeypatch, build_s=10.0, warmup_s=0.0, timed_s=0.0, profile_s=0.0
    )
    out = tmp_path / "d.parquet"
    df = run_sweep(spec, out, progress=False, deadline=80.0)
    assert sorted(set(df.width)) == [0.0625] and len(df) == 2
    clock["t"] = 0.0
    df = run_sweep(spec, out, progress=False, deadline=80.0)  # 2 x 40 s fit now
    assert len(df) == 4 and (df[df.width == 0.125].status == "ok").all()

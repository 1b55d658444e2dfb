"""collect on a Dask cluster (yolo_sm.core.distributed): the plan cut into units, a local
cluster of 2 worker processes on the CPU whose merged tables equal one process's, a worker
killed mid-task, a driver killed mid-plan; the same on one GPU against plain collect."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from yolo_sm.cli.main import main
from yolo_sm.contract import plans as contract_plans
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import COLLECT_TASKS, KEY_COLUMNS, PLACE_COLUMNS
from yolo_sm.core import plan_runners, plans
from yolo_sm.core.distributed import cluster as dcluster
from yolo_sm.core.distributed import units as dunits
from yolo_sm.topics.batch import multi_gpu

ROOT = Path(__file__).resolve().parent.parent
SWEEP = {
    "family": "yolov8",
    "widths": [0.0625, 0.125],
    "precisions": ["fp32"],
    "layouts": ["nchw"],
    "backends": ["eager"],
    "batches": [1, 2],
    "imgsz": [64],
    "budget_ms": 20,
    "warmup_ms": 2,
}
CEILINGS = {"n": 32, "copy_bytes": 1 << 20, "budget_ms": 5}


def _plan(tmp_path, steps, device="cpu", name="plan.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"name": "t", "device": device, "steps": steps}))
    return contract_plans.load_plan(p)


def _sweep(params=SWEEP, name="s"):
    return {"name": name, "kind": "sweep", "out": f"{name}.parquet", "params": params}


def _keys(df):
    return df[list(KEY_COLUMNS)].reset_index(drop=True)


# --- without a cluster ------------------------------------------------------------------------


def test_units_keep_each_models_points_together(tmp_path):
    params = {**SWEEP, "precisions": ["fp32", "fp16"], "layouts": ["nchw", "nhwc"]}
    bench = {"family": "yolov8", "widths": [0.0625, 0.125], "batches": [1, 2], "imgsz": 64}
    plan = _plan(
        tmp_path,
        [
            _sweep(params),
            {"name": "b", "kind": "bench", "out": "b.parquet", "params": bench},
            {"name": "c", "kind": "ceilings", "out": "c.parquet", "params": CEILINGS},
        ],
    )
    units = dunits.plan_units(plan)
    assert [u.step.name for u in units] == ["s", "s", "b", "b", "c"]
    assert len({u.name for u in units}) == len(units)
    full = dunits.full_spec(plan.steps[0], plan).points()
    parts = [dunits.full_spec(u.step, plan).points() for u in units[:2]]
    assert [p.key() for part in parts for p in part] == [p.key() for p in full]
    for part in parts:  # one model per unit, every precision, layout and batch of it
        assert len({p.model_key() for p in part}) == 1 and len(part) == 8
    bench_units = [dunits.full_spec(u.step, plan).units() for u in units[2:4]]
    assert bench_units == [
        [("yolov8", 0.0625, 1), ("yolov8", 0.0625, 2)],
        [("yolov8", 0.125, 1), ("yolov8", 0.125, 2)],
    ]
    assert units[4].step == plan.steps[2]
    assert dunits.plan_units(plan, only=["c"]) == [dunits.Unit(plan.steps[2], "whole", 0)]


def test_cores_are_shared_out():
    assert dcluster.split_cores(2, [0, 1, 2, 3, 4]) == [[0, 1], [2, 3]]
    assert dcluster.split_cores(3, [5, 6]) == [[5], [6], [5]]


def test_nvml_numbers_follow_cuda_visible_devices(monkeypatch):
    from yolo_sm.core.devices import visible_index as nvml_index

    class FakeNvml:
        def nvmlInit(self):
            pass

        def nvmlDeviceGetHandleByUUID(self, uuid):
            return {"GPU-aa": "h5"}[uuid]

        def nvmlDeviceGetIndex(self, handle):
            return int(handle[1:])

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvml_index(1) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert [nvml_index(i) for i in range(3)] == [3, 1, 2]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb")
    assert [nvml_index(i, FakeNvml()) for i in range(2)] == [5, 1]  # unknown UUID: CUDA's


def test_workers_without_dask_is_one_sentence(tmp_path, monkeypatch, capsys):
    plan = tmp_path / "p.yaml"
    plan.write_text(yaml.safe_dump({"name": "t", "device": "cpu", "steps": [_sweep()]}))
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    argv = ["collect", "--plan", str(plan), "--out", str(tmp_path / "d"), "--workers", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "distributed" in err
    assert not (tmp_path / "d" / "s.parquet").exists()


def test_a_shard_left_by_a_killed_worker_is_merged_with_its_place(tmp_path):
    """A shard holding rows of a worker that died before tagging them: the next run's merge
    tags them with the place of owner.json, keeps the table's other rows, and removes it."""
    plan = _plan(tmp_path, [_sweep({**SWEEP, "batches": [1]})])
    out = tmp_path / "d"
    unit_a, unit_b = dunits.plan_units(plan)
    plan_runners.RUNNERS["sweep"](unit_a.step, plan, out, None, False)  # model a, as a plain run
    shard = dunits.shard_dir(out, unit_b)
    shard.mkdir(parents=True)
    plan_runners.RUNNERS["sweep"](unit_b.step, plan, shard, None, False)  # model b, in its shard
    dunits.write_owner(shard, {"gpu_uuid": None, "gpu_index": None, "host": "h", "worker": "w9"})
    assert dunits.merge_unit(unit_b, plan, out, plan.steps[0], command="c")
    df = pd.read_parquet(out / "s.parquet")
    want = [p.key() for p in dunits.full_spec(plan.steps[0], plan).points()]
    assert [tuple(r) for r in _keys(df).itertuples(index=False)] == want
    assert df.worker.isna().tolist() == [True, False]
    assert df.worker.tolist()[1:] == ["w9"] and df.host.tolist()[1:] == ["h"]
    assert not (out / dunits.SHARDS).exists()
    assert json.loads((out / "manifest.json").read_text())["datasets"]["s"]["rows"] == 2
    # the merged table's command line is the user's: no absolute path of the measuring machine
    argv = json.loads(pq.read_schema(out / "s.parquet").metadata[b"yolo_sm"])["argv"]
    assert argv and not any(a.startswith("/") for a in argv), argv


def test_a_whole_step_that_resumes_keeps_the_units_the_plans_table_held(tmp_path, monkeypatch):
    """A compile-cache step runs whole on one worker but resumes unit by unit: its shard
    starts from the plan's table, so a task measures only the units it lacks, and the merge,
    which replaces the table with the shard's, loses none of those measured before (not
    even where the deadline stopped the task before any new unit)."""
    from yolo_sm.topics.deploy import collect as cache_builds

    calls = []

    def run_child(args, env, timeout_s):
        calls.append(args["compile_mode"])
        cold = not any(Path(env["TORCHINDUCTOR_CACHE_DIR"]).iterdir())
        (Path(env["TORCHINDUCTOR_CACHE_DIR"]) / f"g{len(calls)}").write_text("x")
        return {"status": "ok", "message": "", "compile_s": 1.0, "build_s": 2.0,
                "compile_cache": "cold" if cold else "warm", "img_per_s": 10.0,
                "median_ms": 6.4, "warmup_s": 0.1, "timed_s": 0.3}  # fmt: skip

    monkeypatch.setattr(cache_builds, "run_child", run_child)
    params = {"widths": [0.25], "batch": 1, "imgsz": 64, "modes": ["default"]}
    step = {"name": "c", "kind": "compile_cache", "out": "c.parquet", "est_s": 600,
            "params": params}  # fmt: skip
    out = tmp_path / "d"
    plans.run_plan(_plan(tmp_path, [step]), out, progress=False)  # one unit, a plain run
    assert calls == ["default"] * 2
    params.update(modes=["default", "reduce-overhead"], mode_est_s={"reduce-overhead": 300})
    plan = _plan(tmp_path, [step])
    (unit,) = dunits.plan_units(plan)
    place = {"gpu_uuid": None, "gpu_index": None, "host": "h", "worker": "w1"}
    calls.clear()
    state = dunits.run_unit_into_shard(unit, plan, out, place, time.monotonic() + 1)
    assert state == "partial" and calls == []  # a new unit's 300 s do not fit in 1 s
    assert dunits.merge_unit(unit, plan, out, plan.steps[0], command="c")
    df = pd.read_parquet(out / "c.parquet")
    assert df.compile_mode.tolist() == ["default"] * 2 and df.worker.isna().all()
    state = dunits.run_unit_into_shard(unit, plan, out, place)
    assert state == "done" and calls == ["reduce-overhead"] * 2  # the measured one not again
    assert dunits.merge_unit(unit, plan, out, plan.steps[0], command="c")
    df = pd.read_parquet(out / "c.parquet")
    assert df.compile_mode.tolist() == ["default"] * 2 + ["reduce-overhead"] * 2
    assert df.worker.isna().tolist() == [True, True, False, False]
    assert df.worker.tolist()[2:] == ["w1", "w1"]
    assert plans.status(plan, out).state.tolist() == ["done"]


# --- on a local cluster of 2 worker processes (CPU) ---------------------------------------------


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("distributed")
    import distributed

    with dcluster.local_cluster(2, "cpu") as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=120)
        yield c


@pytest.mark.timeout(900)
def test_a_cluster_run_equals_a_single_process_run(tmp_path, client):
    from yolo_sm.core import distributed as dist

    plan = _plan(
        tmp_path,
        [_sweep(), {"name": "c", "kind": "ceilings", "out": "c.parquet", "params": CEILINGS}],
    )
    one, many = tmp_path / "one", tmp_path / "many"
    plans.run_plan(plan, one, progress=False)
    table = dist.run_plan(plan, many, client=client, progress=False)
    assert table.state.tolist() == ["done", "done"]
    a, b = pd.read_parquet(one / "s.parquet"), pd.read_parquet(many / "s.parquet")
    pd.testing.assert_frame_equal(_keys(a), _keys(b))
    assert set(PLACE_COLUMNS) <= set(b) and b.gpu_uuid.isna().all() and b.host.notna().all()
    assert set(b.worker) <= {"w0", "w1"} and b.groupby("width").worker.nunique().eq(1).all()
    c1, c2 = pd.read_parquet(one / "c.parquet"), pd.read_parquet(many / "c.parquet")
    assert c1.ceiling.tolist() == c2.ceiling.tolist() and c2.worker.notna().all()
    m1 = json.loads((one / "manifest.json").read_text())["datasets"]
    m2 = json.loads((many / "manifest.json").read_text())["datasets"]
    assert m2.keys() - m1.keys() == {COLLECT_TASKS}  # the cluster run's task log beside them
    assert m1["s"]["rows"] == m2["s"]["rows"] == 4
    assert not (many / dunits.SHARDS).exists()
    # the task log: one row per unit, the run's wall time at least its longest task's
    log = open_root(many).load(COLLECT_TASKS)
    assert sorted(log.unit) == sorted(u.name for u in dunits.plan_units(plan))
    assert log.state.eq("done").all() and log.workers.eq(2).all() and log.run.nunique() == 1
    assert (log.run_wall_s >= log.seconds.max()).all() and (log.seconds > 0).all()
    assert set(log.worker) <= {"w0", "w1"} and log.gpu_uuid.isna().all()
    # the multi-GPU analysis reads the two roots: the same rows in the merged tables
    found = multi_gpu.facts(open_root(one), open_root(many)).set_index("key").value
    assert found[multi_gpu.PREFIX + "table_mismatches"] == 0
    # a finished plan runs nothing: no task is submitted, the log gains no run
    monkey = dict(plan_runners.RUNNERS)
    try:
        plan_runners.RUNNERS.clear()
        assert dist.run_plan(plan, many, client=client, progress=False).state.eq("done").all()
    finally:
        plan_runners.RUNNERS.update(monkey)
    assert len(pd.read_parquet(many / f"{COLLECT_TASKS}.parquet")) == len(log)


def _nonempty(df):
    return df if df is not None and len(df) else None


def _wait(cond, timeout=120.0, every=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if isinstance(got, pd.DataFrame) or got:
            return got
        time.sleep(every)
    return None


def _rows(path):
    try:
        return pd.read_parquet(path)
    except Exception:  # noqa: BLE001 - not written yet, or being replaced
        return None


@pytest.mark.timeout(900)
def test_a_worker_killed_mid_task_is_replaced_and_nothing_is_lost_or_doubled(tmp_path, client):
    from yolo_sm.core import distributed as dist

    params = {**SWEEP, "widths": [0.0625], "batches": [1, 2, 3], "budget_ms": 150}
    plan = _plan(tmp_path, [_sweep(params)])
    out = tmp_path / "d"
    (unit,) = dunits.plan_units(plan)
    shard = dunits.shard_dir(out, unit)
    seen = {}

    def kill_after_first_point():
        df = _wait(lambda: _nonempty(_rows(shard / "s.parquet")), timeout=600)
        owner = dunits.read_owner(shard)
        if df is None or owner is None:
            return
        os.kill(owner["pid"], signal.SIGKILL)
        seen.update(rows=df, owner=owner)

    killer = threading.Thread(target=kill_after_first_point)
    killer.start()
    table = dist.run_plan(plan, out, client=client, progress=False)
    killer.join()
    assert "rows" in seen, "the worker was not killed mid-task"
    assert table.state.tolist() == ["done"]
    df = pd.read_parquet(out / "s.parquet")
    want = [p.key() for p in dunits.full_spec(unit.step, plan).points()]
    assert [tuple(r) for r in _keys(df).itertuples(index=False)] == want  # each point once
    assert df.status.eq("ok").all() and df.worker.notna().all()
    before = seen["rows"].set_index("batch")
    after = df.set_index("batch").loc[before.index]
    assert after.median_ms.tolist() == before.median_ms.tolist()  # not measured again
    assert after.worker.eq(seen["owner"]["worker"]).all()
    client.wait_for_workers(2, timeout=60)  # the nanny's new worker registers (slow when busy)
    c = client.scheduler_info()["workers"]
    assert len(c) == 2 and seen["owner"]["pid"] not in {w.get("pid") for w in c.values()}


_DRIVER = """
import sys
from yolo_sm.core import distributed
from yolo_sm.contract.plans import load_plan
distributed.run_plan(load_plan(sys.argv[1]), sys.argv[2], workers=1, progress=False)
"""


@pytest.mark.timeout(900)
def test_a_killed_driver_resumes_without_measuring_merged_units_again(tmp_path, client):
    from yolo_sm.core import distributed as dist

    plan = _plan(tmp_path, [_sweep({**SWEEP, "batches": [1]})])
    out = tmp_path / "d"
    first, second = dunits.plan_units(plan)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, plan.path, str(out)],
        env=env,
        stderr=subprocess.PIPE,
    )
    try:
        # the first model merged and the second one's task started: kill the driver
        shard = dunits.shard_dir(out, second)
        got = _wait(
            lambda: (out / "s.parquet").exists() and dunits.read_owner(shard) is not None,
            timeout=600,
        )
        merged = _rows(out / "s.parquet")
        owner = dunits.read_owner(shard)
        driver.kill()
        driver.wait(timeout=30)
        assert got, driver.stderr.read().decode()[-2000:]
    finally:
        if driver.poll() is None:
            driver.kill()
    # the driver's worker process exits with it (no writer left on the shard)
    assert _wait(lambda: not dcluster_alive(owner["pid"]), timeout=60)
    table = dist.run_plan(plan, out, client=client, progress=False)
    assert table.state.tolist() == ["done"]
    df = pd.read_parquet(out / "s.parquet")
    want = [p.key() for p in dunits.full_spec(first.step, plan).points()]
    want += [p.key() for p in dunits.full_spec(second.step, plan).points()]
    assert [tuple(r) for r in _keys(df).itertuples(index=False)] == want
    kept = df[df.width == 0.0625].median_ms.tolist()
    assert kept == merged[merged.width == 0.0625].median_ms.tolist()  # merged: not run again
    assert df.worker.notna().all()
    # the killed run logged nothing; the resumed one logs the unit it ran, not the merged one
    log = pd.read_parquet(out / f"{COLLECT_TASKS}.parquet")
    assert log.unit.tolist() == [second.name] and log.state.tolist() == ["done"]


def dcluster_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of the killed driver counts as gone
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0
    except OSError:
        return False


# --- on one GPU -----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.timeout(600)
def test_one_gpu_worker_gives_the_tables_of_plain_collect(tmp_path):
    pytest.importorskip("distributed")
    from yolo_sm.core import distributed as dist

    params = {
        **SWEEP,
        "widths": [0.25, 0.5],
        "precisions": ["fp32", "fp16"],
        "layouts": ["nhwc"],
        "backends": ["eager", "cudagraph"],
        "batches": [1, 8],
        "imgsz": [320],
        "budget_ms": 100,
        "warmup_ms": 20,
    }
    ceil = {"n": 2048, "copy_bytes": 1 << 26, "budget_ms": 50}
    plan = _plan(
        tmp_path,
        [_sweep(params), {"name": "c", "kind": "ceilings", "out": "c.parquet", "params": ceil}],
        device="cuda",
    )
    t0 = time.perf_counter()
    plans.run_plan(plan, tmp_path / "plain", progress=False)
    plain_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    table = dist.run_plan(plan, tmp_path / "dask", workers=1, progress=False)
    dask_s = time.perf_counter() - t0
    assert table.state.eq("done").all()
    a = pd.read_parquet(tmp_path / "plain" / "s.parquet")
    b = pd.read_parquet(tmp_path / "dask" / "s.parquet")
    pd.testing.assert_frame_equal(_keys(a), _keys(b))
    assert a.status.tolist() == b.status.tolist()
    assert b.gpu_uuid.str.startswith("GPU-").all() and b.gpu_index.notna().all()
    assert b.worker.eq("w0").all()
    c1, c2 = (pd.read_parquet(tmp_path / d / "c.parquet") for d in ("plain", "dask"))
    assert c1.ceiling.tolist() == c2.ceiling.tolist()
    line = (
        f"collect --workers 1 overhead: plain {plain_s:.1f} s, dask {dask_s:.1f} s, "
        f"+{dask_s - plain_s:.1f} s ({100 * (dask_s / plain_s - 1):.0f} %)"
    )
    print(line)
    report = os.environ.get("YOLO_SM_OVERHEAD_OUT")
    if report:
        Path(report).write_text(line + "\n")


def test_the_driver_refuses_another_gpu_models_folder_before_any_task(tmp_path, monkeypatch):
    """A folder of one GPU model's tables takes no units from a cluster of another's: the
    driver stops with one sentence before it submits a task (the client is never used)."""
    pytest.importorskip("distributed")
    from yolo_sm.core import distributed as dist
    from yolo_sm.core import provenance

    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(
        json.dumps({"datasets": {}, "machine": {"gpu_name": ["NVIDIA H200"]}})
    )
    monkeypatch.setattr(provenance, "gpu_name", lambda device: "NVIDIA H100 80GB HBM3")
    with pytest.raises(UserError, match="measured on NVIDIA H200 and this GPU is NVIDIA H100"):
        dist.run_plan(_plan(tmp_path, [_sweep()]), out, client=object(), progress=False)
    assert not (out / dunits.SHARDS).exists()


def test_a_cluster_of_two_gpu_models_or_of_another_than_the_folders_is_refused(tmp_path):
    """The driver asks each worker for its GPU model before any task: two models in one
    cluster, or another model than the folder's tables, stop with one sentence; a cluster of
    one model, or of workers without a named GPU, goes on."""
    pytest.importorskip("distributed")
    from yolo_sm.core import distributed as dist

    class Workers:
        def __init__(self, names):
            self.names = names

        def run(self, fn, *args):
            return self.names

    out = tmp_path / "out"
    out.mkdir()
    two = Workers({"a": "NVIDIA H200", "b": "NVIDIA H100 80GB HBM3", "c": None})
    with pytest.raises(UserError, match=r"GPUs of 2 models \(NVIDIA H100 80GB HBM3, NVIDIA H200"):
        dist.check_cluster_gpus(two, out, "cuda")
    dist.check_cluster_gpus(Workers({"a": "NVIDIA H200", "b": "NVIDIA H200"}), out, "cuda")
    dist.check_cluster_gpus(Workers({"a": None}), out, "cuda")
    (out / "manifest.json").write_text(
        json.dumps({"datasets": {}, "machine": {"gpu_name": ["NVIDIA H200"]}})
    )
    with pytest.raises(UserError, match="measured on NVIDIA H200 and this GPU is NVIDIA H100"):
        dist.check_cluster_gpus(Workers({"a": "NVIDIA H100 80GB HBM3"}), out, "cuda")
    dist.check_cluster_gpus(Workers({"a": "NVIDIA H200"}), out, "cuda")
    # through the driver: refused before a shard is seeded with the rows a unit holds
    plan, cpu_root = _plan(tmp_path, [_sweep()]), tmp_path / "cpu_root"
    plans.run_plan(plan, cpu_root, progress=False)
    pd.read_parquet(cpu_root / "s.parquet").iloc[:1].to_parquet(cpu_root / "s.parquet")
    with pytest.raises(UserError, match="GPUs of 2 models"):
        dist.run_plan(plan, cpu_root, client=two, progress=False)
    assert not (cpu_root / dunits.SHARDS).exists()

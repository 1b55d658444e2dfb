"""Faults a machine or a second user inflicts, on the CPU with tiny models: SIGKILL at random
moments of a sweep and of a collect (resumed until complete: every point exactly once, every
step registered), two writers on one output (the second refuses; a dead holder's lock is
taken over), concurrent manifest registrations (none lost), single-bit flips of a written
table (each an error or harmless, none silent) and a full disk (on a small tmpfs, where this
machine may mount one). Each test prints its figures (``pytest -s``)."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yolo_sm.cli.main import main as cli_main
from yolo_sm.contract import manifest, store
from yolo_sm.contract import plans as contract_plans
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import validate
from yolo_sm.core import plan_runners, plans
from yolo_sm.core.sweep import KEY_COLUMNS, SweepSpec, run_sweep

ROOT = Path(__file__).resolve().parents[1]
# one thread per child: the children and the test share a CI runner's two cores
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
TINY = dict(
    family="yolov8", widths="0.0625", precisions="fp32", layouts="nchw,nhwc",
    backends="eager", batches="1,2", imgsz=64, budget_ms=5, warmup_ms=1, device="cpu",
    check=False,
)  # fmt: skip
SEED = 22  # the kill moments and flipped bits: one draw, the same on every run
#: kills per run of a sweep and of a collect (more for a longer soak: YOLO_SM_FAULT_KILLS=20)
KILLS = int(os.environ.get("YOLO_SM_FAULT_KILLS", "3"))
LIMIT_S = 130 * max(1, KILLS // 3)

SWEEP_CHILD = """
import json, sys
from yolo_sm.core.sweep import SweepSpec, run_sweep
spec = SweepSpec.from_mapping(json.loads(sys.argv[2]))
print("ready", flush=True)
run_sweep(spec, sys.argv[1], progress=False)
"""

COLLECT_CHILD = """
import sys
from yolo_sm.core import plans
from yolo_sm.contract.plans import load_plan
plan = load_plan(sys.argv[1])
print("ready", flush=True)
plans.run_plan(plan, sys.argv[2], progress=False)
"""


@pytest.fixture(autouse=True)
def one_thread():
    """The in-process sweeps on one thread too (restored after): the children and the test
    share the runner's cores, and oversubscribed OpenMP threads spin."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _spec(**over) -> SweepSpec:
    return SweepSpec.from_mapping({**TINY, **over})


def _keys(df) -> list[tuple]:
    return [tuple(r) for r in df[list(KEY_COLUMNS)].itertuples(index=False)]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".partial", ".probe")))


def _kill_until_done(argv, done, progress, rng, kills_wanted: int, limit_s: float) -> int:
    """Start ``argv`` again and again until ``done()``; the first ``kills_wanted`` runs are
    SIGKILLed at a random moment: once ``progress()`` (a count of rows and registrations)
    has moved, after a random share (0-30 %) of the time that first move took (its model
    build and first unit), so that a kill lands anywhere in the next unit (measuring,
    writing, registering) whatever this machine's speed.
    Returns the number of kills."""
    kills, t_end = 0, time.monotonic() + limit_s
    while not done() and time.monotonic() < t_end:
        proc = subprocess.Popen(
            argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
            if kills < kills_wanted:
                start, before = time.monotonic(), progress()
                while proc.poll() is None and progress() == before:
                    time.sleep(0.005)
                time.sleep(rng.uniform(0.0, 0.3) * (time.monotonic() - start))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    kills += 1
            rc = proc.wait(timeout=max(1.0, t_end - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert rc in (0, -signal.SIGKILL), proc.stderr.read()
    return kills


def _rows(path: Path) -> int:
    try:
        return len(store.read_frame(path))
    except UserError:  # not written yet
        return 0


@pytest.mark.timeout(LIMIT_S + 20)
def test_sigkill_at_random_moments_of_a_sweep(tmp_path):
    out = tmp_path / "sweep.parquet"
    spec = _spec()
    expected = {p.key() for p in spec.points()}
    argv = [sys.executable, "-c", SWEEP_CHILD, str(out), json.dumps(TINY)]

    def done():
        return out.exists() and {*_keys(store.read_frame(out))} >= expected

    kills = _kill_until_done(argv, done, lambda: _rows(out), random.Random(SEED), KILLS, LIMIT_S)
    df = store.read_frame(out)
    keys = _keys(df)
    lost, dup = len(expected - set(keys)), len(keys) - len(set(keys))
    print(f"\nsweep: kills {kills}, points {len(expected)}, lost {lost}, duplicated {dup}")
    assert kills >= 1 and lost == 0 and dup == 0 and set(keys) == expected
    assert (df.status == "ok").all() and _leftovers(tmp_path) == []


PLAN = """
name: faults
device: cpu
steps:
  - name: sweep_a
    kind: sweep
    out: a.parquet
    description: tiny sweep a
    params: {{family: yolov8, widths: 0.0625, precisions: fp32, layouts: nchw, backends: eager,
             batches: [1, 2], imgsz: 64, budget_ms: 5, warmup_ms: 1, check: false}}
  - name: sweep_b
    kind: sweep
    out: {b}
    description: tiny sweep b
    params: {{family: yolov8, widths: 0.0625, precisions: fp32, layouts: nhwc, backends: eager,
             batches: [1, 2], imgsz: 64, budget_ms: 5, warmup_ms: 1, check: false}}
"""


def _plan(tmp_path: Path, b: str = "b.parquet"):
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN.format(b=b))
    return contract_plans.load_plan(path)


@pytest.mark.timeout(LIMIT_S + 20)
def test_sigkill_at_random_moments_of_a_collect(tmp_path):
    plan = _plan(tmp_path)
    out = tmp_path / "root"
    argv = [sys.executable, "-c", COLLECT_CHILD, plan.path, str(out)]

    def done():
        return out.exists() and all(plans.step_state(s, plan, out) == "done" for s in plan.steps)

    def progress():
        mf = out / "manifest.json"
        entries = len(json.loads(mf.read_text())["datasets"]) if mf.exists() else 0
        return sum(_rows(out / s.out) for s in plan.steps) + entries

    kills = _kill_until_done(argv, done, progress, random.Random(SEED + 1), KILLS, LIMIT_S)
    entries = manifest.read_manifest(out)["datasets"]
    lost = dup = unregistered = 0
    for s in plan.steps:
        df = store.read_frame(out / s.out)
        keys = _keys(df)
        points = {p.key() for p in SweepSpec.from_mapping({"device": "cpu", **s.params}).points()}
        lost += len(points - set(keys))
        dup += len(keys) - len(set(keys))
        unregistered += s.name not in entries or entries[s.name]["rows"] != len(df)
    print(f"\ncollect: kills {kills}, lost {lost}, duplicated {dup}, unregistered {unregistered}")
    assert kills >= 1 and (lost, dup, unregistered) == (0, 0, 0)
    assert _leftovers(out) == []


SLOW_PLAN = """
name: term
device: cpu
steps:
  - name: sweep_t
    kind: sweep
    out: t.parquet
    description: tiny sweep
    params: {family: yolov8, widths: 0.0625, precisions: fp32, layouts: [nchw, nhwc],
             backends: eager, batches: [1, 2, 3, 4, 5, 6, 7, 8], imgsz: 64, budget_ms: 300,
             warmup_ms: 1,
             check: false}
"""


@pytest.mark.timeout(240)
def test_sigterm_stops_a_collect_that_registers_what_it_measured_and_its_seconds(tmp_path):
    """``kill`` / ``timeout`` / a scheduler's SIGTERM mid-sweep: exit 143, the partial table
    registered with this run's seconds (not lost as under SIGKILL); a rerun completes it and
    adds its own run."""
    path = tmp_path / "plan.yaml"
    path.write_text(SLOW_PLAN)
    plan = contract_plans.load_plan(path)
    out = tmp_path / "root"
    argv = [sys.executable, "-m", "yolo_sm", "collect", "--plan", str(path), "--out", str(out)]
    argv.append("-q")
    proc = subprocess.Popen(
        argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        t_end = time.monotonic() + 180
        while proc.poll() is None and _rows(out / "t.parquet") < 2 and time.monotonic() < t_end:
            time.sleep(0.01)
        # still measuring: 16 points of 0.3 s, so the signal lands seconds before the run
        # could end (a SIGTERM that lands as main() returns is not what this test is about)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert rc == 143, err
    assert "stopped by SIGTERM" in err and "Traceback" not in err
    df = store.read_frame(out / "t.parquet")
    entry = manifest.read_manifest(out)["datasets"]["sweep_t"]
    assert 2 <= len(df) < 16 and entry["rows"] == len(df)
    assert entry["description"].startswith("PARTIAL")
    assert plans.step_state(plan.steps[0], plan, out) == "partial"
    assert subprocess.run(argv, env=ENV, capture_output=True, timeout=180).returncode == 0
    entry = manifest.read_manifest(out)["datasets"]["sweep_t"]
    assert entry["rows"] == 16 and _leftovers(out) == []


@pytest.mark.timeout(300)
def test_collect_repairs_lost_registrations_without_measuring(tmp_path, monkeypatch):
    plan = _plan(tmp_path)
    out = tmp_path / "root"
    plans.run_plan(plan, out, progress=False)
    good = manifest.read_manifest(out)["datasets"]
    measured = []
    monkeypatch.setitem(plan_runners.RUNNERS, "sweep", lambda *a: measured.append(a))
    mf = out / "manifest.json"
    for damage in ("entry", "deleted", "corrupt", "wrong rows"):
        if damage == "entry":
            m = json.loads(mf.read_text())
            del m["datasets"]["sweep_b"]
            mf.write_text(json.dumps(m))
        elif damage == "deleted":
            mf.unlink()
        elif damage == "corrupt":
            mf.write_bytes(b'{"datasets": {"sweep_a": \x00\xff')
        else:
            m = json.loads(mf.read_text())
            m["datasets"]["sweep_a"]["rows"] = 1
            mf.write_text(json.dumps(m))
        assert {plans.step_state(s, plan, out) for s in plan.steps} != {"done"}, damage
        with pytest.warns(UserWarning) if damage == "corrupt" else _no_warning():
            plans.run_plan(plan, out, progress=False)
        now = manifest.read_manifest(out)["datasets"]
        assert set(now) == set(good), damage
        for name in good:
            assert {k: v for k, v in now[name].items()} == good[name], (damage, name)
    assert measured == []  # every repair came from the tables, nothing was measured again
    assert (out / "manifest.json.corrupt").exists()  # the damaged file is kept for a look


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_plan_outputs_stay_inside_their_folder(tmp_path):
    for bad in ("../escape.parquet", "/tmp/abs.parquet", "x/../../up.parquet"):
        with pytest.raises(UserError, match="sweep_b"):  # the plan is refused as it is read
            plans.run_plan(_plan(tmp_path, b=bad), tmp_path / "root", progress=False)
        assert not (tmp_path / "root").exists()  # refused before any work
    mf = tmp_path / "r" / "manifest.json"
    mf.parent.mkdir()
    mf.write_text(json.dumps({"datasets": {"x": {"file": "../../etc/passwd", "kind": "sweep"}}}))
    from yolo_sm.contract.datasets import open_root

    with pytest.raises(UserError, match="outside"):
        open_root(mf.parent).load("x")


# --- one writer per output -------------------------------------------------------------------

HOLD = """
import sys, time
from yolo_sm.contract.store import output_lock
with output_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.mark.timeout(300)
def test_a_second_writer_refuses_and_two_grids_keep_every_row(tmp_path, capsys):
    out = tmp_path / "shared.parquet"
    grid_a, grid_b = dict(TINY, layouts="nchw"), dict(TINY, layouts="nhwc")
    first = subprocess.Popen(
        [sys.executable, "-c", SWEEP_CHILD, str(out), json.dumps(grid_a)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert first.stdout.readline().strip() == "ready"
        t_end = time.monotonic() + 60
        while store.lock_holder(out) is None and first.poll() is None:
            assert time.monotonic() < t_end
            time.sleep(0.01)
        assert first.poll() is None  # the first sweep holds its output: the second stops
        with pytest.raises(UserError, match=f"process {first.pid}"):
            run_sweep(_spec(layouts="nhwc"), out, progress=False)
        argv = [f"--{k.replace('_', '-')}={v}" for k, v in grid_b.items() if k != "check"]
        rc = cli_main(["sweep", *argv, "--no-check", "--out", str(out), "--quiet"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "being written" in err[0], err
        assert first.wait(timeout=120) == 0, first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
    run_sweep(_spec(layouts="nhwc"), out, progress=False)  # after the first: both grids kept
    keys = _keys(store.read_frame(out))
    want = {p.key() for p in _spec(layouts="nchw").points()} | {
        p.key() for p in _spec(layouts="nhwc").points()
    }
    print(f"\ntwo grids on one output: {len(keys)} rows of {len(want)}")
    assert sorted(keys) == sorted(want)


def test_a_dead_holders_lock_is_taken_over(tmp_path):
    out = tmp_path / "t.parquet"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], env=ENV, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match=f"process {holder.pid}"):
            with store.output_lock(out):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert store.lock_holder(out)["pid"] == holder.pid  # its file is left, its lock is not
    with store.output_lock(out):
        assert store.lock_holder(out)["pid"] == os.getpid()
    assert store.lock_holder(out) is None


# --- concurrent manifest registrations -------------------------------------------------------

REGISTER = """
import sys, time
from pathlib import Path
from yolo_sm.contract.manifest import register
folder, me, each = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
while not (folder / "go").exists():
    time.sleep(0.002)
for k in range(each):
    register(folder, f"{me}_{k}", f"{me}.parquet", "ceilings", "d", "cmd", params={"k": k})
"""


@pytest.mark.timeout(150)
def test_concurrent_registrations_lose_nothing(tmp_path):
    writers, each = 4, 50
    for i in range(writers):
        store.write_atomic(
            pd.DataFrame({"ceiling": ["m"], "value": [1.0], "unit": ["x"], "median_ms": [2.0]}),
            tmp_path / f"w{i}.parquet",
        )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", REGISTER, str(tmp_path), f"w{i}", str(each)],
            env=ENV,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(writers)
    ]
    time.sleep(2.0)  # every writer imported and waiting
    (tmp_path / "go").touch()
    errors = [p.communicate(timeout=140)[1] for p in procs]
    crashed = sum(p.returncode != 0 for p in procs)
    names = set(manifest.read_manifest(tmp_path)["datasets"])
    lost = writers * each - len(names)
    print(f"\nregistrations: {writers} x {each}, lost {lost}, crashed {crashed}")
    assert crashed == 0, errors
    assert names == {f"w{i}_{k}" for i in range(writers) for k in range(each)}
    (tmp_path / "manifest.json").unlink()  # each table holds its own registrations
    assert set(manifest.rebuild(tmp_path)) == names
    assert _leftovers(tmp_path) == []


# --- single-bit flips --------------------------------------------------------------------------


def _sweep_like(n: int = 64) -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    return pd.DataFrame(
        {
            "family": "yolov8", "scale": "", "width": rng.choice([0.0625, 0.25, 1.0], n),
            "depth": 0.33, "max_channels": 2048, "precision": rng.choice(["fp16", "fp32"], n),
            "layout": "nhwc", "backend": "eager", "batch": rng.integers(1, 64, n),
            "imgsz": 640, "compile_mode": "default", "device": "cpu", "status": "ok",
            "message": "", "flops_per_img": rng.integers(1, 10**9, n),
            "median_ms": rng.random(n) * 100, "iqr_ms": rng.random(n), "min_ms": rng.random(n),
            "img_per_s": rng.random(n) * 1000, "tflops": rng.random(n), "rel_err": rng.random(n),
            "samples_ms": [list(rng.random(5)) for _ in range(n)], "noisy": rng.random(n) > 0.5,
            "bn_calibrated": True,
        }
    )  # fmt: skip


def test_single_bit_flips_are_errors_or_harmless_never_silent(tmp_path):
    path = tmp_path / "t.parquet"
    store.write_atomic(_sweep_like(), path, {"spec": {"widths": [0.0625]}, "argv": ["yolo-sm"]})
    good, good_meta = validate(store.read_frame(path), "sweep"), store.read_metadata(path)
    data = path.read_bytes()
    rng = random.Random(SEED)
    bad = tmp_path / "flipped.parquet"
    counts = {"error": 0, "harmless": 0, "silent": 0}
    for _ in range(200):
        flipped = bytearray(data)
        flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        bad.write_bytes(bytes(flipped))
        try:
            df = validate(store.read_frame(bad), "sweep", source=bad)
        except UserError as e:
            assert len(str(e).splitlines()) == 1 and str(bad) in str(e)
            counts["error"] += 1
            continue
        same = df.equals(good) and (df.dtypes == good.dtypes).all()
        counts["harmless" if same and store.read_metadata(bad) == good_meta else "silent"] += 1
    print(f"\nbit flips: 200 tried, {counts}")
    assert counts["silent"] == 0 and counts["error"] > 100


# --- a full disk -------------------------------------------------------------------------------


@pytest.fixture
def tiny_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
    )
    if res.returncode != 0:
        pytest.skip("this machine does not let the tests mount a small tmpfs")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_leaves_the_old_table_and_manifest_whole(tiny_disk):
    small = pd.DataFrame({"ceiling": ["m"], "value": [1.0], "unit": ["x"], "median_ms": [2.0]})
    table = tiny_disk / "c.parquet"
    store.write_atomic(small, table)
    manifest.register(tiny_disk, "c", "c.parquet", "ceilings", "d", "cmd")
    before_mf = (tiny_disk / "manifest.json").read_bytes()
    rng = np.random.default_rng(0)
    big = pd.DataFrame({"ceiling": ["m"] * 200_000, "value": rng.random(200_000),
                        "unit": ["x"] * 200_000, "median_ms": rng.random(200_000)})  # fmt: skip
    with pytest.raises(OSError):
        store.write_atomic(big, table)
    pd.testing.assert_frame_equal(store.read_frame(table), small)
    filler = tiny_disk / "filler"
    with pytest.raises(OSError), open(filler, "wb") as fh:
        while True:
            fh.write(b"\0" * 4096)
            fh.flush()
    with pytest.raises(OSError):
        manifest.register(tiny_disk, "c2", "c.parquet", "ceilings", "a long " * 2000, "cmd")
    assert (tiny_disk / "manifest.json").read_bytes() == before_mf
    pd.testing.assert_frame_equal(store.read_frame(table), small)
    assert _leftovers(tiny_disk) == []


# --- an ncu kernel whose metrics all read n/a ---------------------------------------------------


def test_an_ncu_kernel_with_only_na_metrics_is_kept_and_counted(tmp_path):
    import csv
    import io

    from yolo_sm.core.profiling import ncu

    raw = ROOT / "tests" / "fixtures" / "ncu_raw_h200_small.csv"
    lines = raw.read_text().splitlines()
    head = [ln for ln in lines if not ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(ln for ln in lines if ln.startswith('"')))))
    header, victim = rows[0], rows[2 + 3]  # the kernel of ID 3
    for i, name in enumerate(header):
        if "__" in name:
            victim[i] = "n/a"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path = tmp_path / "na.csv"
    path.write_text("\n".join(head) + "\n" + buf.getvalue())
    with pytest.warns(UserWarning, match="1 kernel"):
        df = ncu.load_ncu(path)
    assert len(df) == len(ncu.load_ncu(raw)) and df.attrs["kernels_without_metrics"] == 1
    row = df.set_index("kernel_id").loc[int(victim[header.index("ID")])]
    assert pd.isna(row.duration_us) and row.kernel_name == victim[header.index("Kernel Name")]

"""Dataset roots load by name, carry their columns and provenance; loaders fail clearly; a live
root collects its plan's datasets on this machine before loading them."""

import math

import pandas as pd
import pytest

from yolo_sm.contract import datasets, manifest
from yolo_sm.contract.datasets import DataRoot, open_root
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.plans import KINDS, load_plan
from yolo_sm.contract.schema import SCHEMAS, validate
from yolo_sm.core import live


def test_every_shipped_dataset_loads_with_columns_and_provenance():
    listing = datasets.manifests()
    assert {"h200/sweep_fp16_nhwc", "cpu/numerics"} <= set(listing)
    for name in listing:
        df = datasets.load(name)
        entry = datasets.info(name)
        assert len(df) == entry["rows"], name
        if not len(df):  # the profiler's CPU trace holds no GPU kernels: an empty kernel table
            assert name.startswith("cpu/") and entry["kind"] == "kernels", name
            continue
        prov = df.attrs["provenance"]
        # the live monitor reads NVML only (no torch, no model): its provenance is the GPU's
        keys = ("gpu_name", "driver") if entry["kind"] == "monitor" else ("torch", "ultralytics")
        for key in (*keys, "python", "date_utc_last"):
            assert prov.get(key), f"{name} lacks provenance {key}"
        # the device it was measured (or counted) on; a GPU's with its driver stack
        assert prov.get("gpu_name") or prov.get("cpu_model"), f"{name} names no device"
        stack = ("driver",) if entry["kind"] == "monitor" else ("driver", "cuda", "cudnn")
        for key in stack if prov.get("gpu_name") else ():
            assert prov.get(key), f"{name} lacks provenance {key}"
        assert not (name.startswith("cpu/") and prov.get("gpu_name")), name
        assert entry["command"]


def test_the_reference_sweep_is_complete_and_sane():
    df = datasets.load("h200/sweep_fp16_nhwc")
    params = datasets.info("h200/sweep_fp16_nhwc")["params"]
    grid = [len(params[k]) for k in ("widths", "precisions", "layouts", "backends", "batches")]
    assert len(df) == math.prod(grid) and (df.status == "ok").all()
    assert df.duplicated(["width", "precision", "layout", "backend", "batch"]).sum() == 0
    assert (df.prov_gpu_name == "NVIDIA H200").all() and (df.prov_sm_count == 132).all()
    # every row keeps its raw samples, and the median is theirs
    for _, r in df.sample(10, random_state=0).iterrows():
        assert len(r.samples_ms) == r.n_samples
        assert r.median_ms == pytest.approx(pd.Series(r.samples_ms).median())
    assert (df.rel_err <= 2e-2).all()  # fp16 against eager fp32 on the same input


def test_unknown_dataset_names_the_known_ones():
    with pytest.raises(UserError, match="h200/sweep_fp16_nhwc"):
        datasets.load("h200/nope")
    with pytest.raises(UserError, match="h200/sweep_fp16_nhwc"):
        datasets.path("h200/nope")
    entry = datasets.info("h200/ceilings")
    assert datasets.path("h200/ceilings") == datasets.data_dir() / "h200" / entry["file"]
    with pytest.raises(UserError, match="sweep_fp16_nhwc"):
        open_root("h200").load("nope")
    with pytest.raises(UserError, match="shipped roots: cpu, h100, h200"):
        open_root("no_such_root")


def test_validate_names_missing_columns():
    df = pd.DataFrame({"family": ["yolov8"], "width": [1.0]})
    with pytest.raises(ValueError, match="median_ms"):
        validate(df, "sweep", "mine")


@pytest.mark.parametrize(
    "text", ["key_columns = [", '[common]\n[groups]\n[kind.x]\ncolumns = ["nope"]\nrequired = []']
)
def test_a_malformed_column_contract_is_one_sentence_naming_it(tmp_path, monkeypatch, text):
    from yolo_sm.contract import schema

    bad = tmp_path / "columns.toml"
    bad.write_text(text)
    monkeypatch.setattr(schema, "_FILE", bad)
    with pytest.raises(UserError, match=r"columns\.toml is not a valid column contract"):
        schema._load()
    monkeypatch.undo()
    assert schema._load()["kind"]["sweep"]["columns"] == SCHEMAS["sweep"]


def test_register_and_corrupt_file(tmp_path, monkeypatch):
    src = datasets.load("h200/sweep_fp16_nhwc")
    folder = tmp_path / "m"
    folder.mkdir()
    src.head(3).to_parquet(folder / "s.parquet")
    entry = manifest.register(folder, "s", "s.parquet", "sweep", "three rows", "cmd")
    assert entry["rows"] == 3 and entry["provenance"]["gpu_name"] == "NVIDIA H200"
    assert set(SCHEMAS["sweep"]) & set(src.columns) <= set(entry["columns"])  # each described
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    assert len(datasets.load("m/s")) == 3
    assert open_root("m").has("s") and not open_root("m").has("t")
    (folder / "s.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(UserError, match="cannot be read"):
        datasets.load("m/s")
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(UserError, match="manifest"):
        datasets.manifests()


# --- roots: the machine from provenance, one sentence for what a root lacks -------------------


def test_roots_name_their_machine_from_provenance():
    h200, cpu = open_root("h200"), open_root("cpu")
    assert h200.device_name() == "NVIDIA H200" and h200.machine()["sm_count"] == "132"
    m = cpu.machine()
    assert "gpu_name" not in m and cpu.device_name() == m["cpu_model"]
    assert m["date_utc_first"] <= m["date_utc_last"]


def test_cpu_root_holds_what_its_plan_collects_with_provenance():
    cpu = open_root("cpu")
    plan = load_plan(datasets.data_dir() / "plans" / "cpu.yaml")
    assert plan.device == "cpu"
    assert cpu.names() == sorted(s.name for s in plan.steps)
    for s in plan.steps:
        entry = cpu.info(s.name)
        assert entry["params"] == s.params and entry["kind"] == s.dataset_kind
        assert entry["command"].startswith("yolo-sm collect --plan data/plans/cpu.yaml")
        df = cpu.load(s.name)
        assert set(df.prov_device) == ({"cpu"} if len(df) else set())
    size = sum(f.stat().st_size for f in cpu.path.rglob("*") if f.is_file())
    assert size < 2 * 2**20, f"data/cpu holds {size} bytes"


def test_numerics_table_on_the_cpu_root():
    num = open_root("cpu").load("numerics")
    kinds = set(zip(num.input, num.metric, strict=True))
    assert kinds == {("random", "rel_err"), ("photo", "rel_err"), ("photo", "boxes")}
    assert set(num.width) == {0.25, 0.5} and set(num.device) == {"cpu"}
    rnd = num[num.input == "random"]
    assert (rnd.rel_err <= rnd.tolerance).all()  # fp16 / bf16 within their tolerance
    assert (rnd[rnd.precision == "fp32"].rel_err < 1e-4).all()
    photos = num[(num.input == "photo") & (num.metric == "rel_err")]
    # fp8 with and without the class prior, per width; E4M3 errs more than fp16
    per = photos.groupby(["width", "class_prior"]).precision.apply(set)
    assert len(per) == 4 and all(p == {"fp16", "bf16", "fp8"} for p in per)
    err = photos.pivot_table(index=["width", "class_prior"], columns="precision", values="rel_err")
    assert (err.fp8 > err.fp16).all()
    assert set(photos[photos.precision == "fp8"].fp8_kernel) == {"emulate"}
    boxes = num[num.metric == "boxes"]
    assert boxes.matched.between(0, 1).all() and (boxes.reference == "fp16").all()


def test_missing_names_the_dataset_and_the_step_that_collects_it():
    cpu, h200 = open_root("cpu"), open_root("h200")
    line = cpu.missing("ncu_width_b8")
    assert "ncu_width_b8" in line and "data/plans/full.yaml --only ncu_width_b8" in line
    assert "H200" not in line and "\n" not in line
    # a step of the root's own plan: the command that collects it into that root
    assert "--plan data/plans/cpu.yaml --out data/cpu --only numerics" in cpu.missing("numerics")
    assert "--out data/h200 --only ncu_width_b8" in h200.missing("ncu_width_b8")
    assert "--only" not in cpu.missing("neither_shipped_nor_planned")


def test_numerics_is_a_plan_kind_with_a_schema():
    assert "numerics" in KINDS and "numerics" in SCHEMAS
    plan = load_plan(datasets.data_dir() / "plans" / "full.yaml")
    step = next(s for s in plan.steps if s.kind == "numerics")
    assert step.name == "numerics" and step.dataset_kind == "numerics"


# --- live roots: LIVE = True in a notebook ----------------------------------------------------


@pytest.fixture
def gpu_live(monkeypatch, tmp_path):
    """A live root on the full plan, with torch told there is a GPU and the plan runner replaced
    by a copy of the shipped table (what a real run would register); yields (root, calls)."""
    import shutil

    import torch

    calls = []

    def fake_run_plan(plan, out, only=None, max_minutes=None, **kw):
        calls.append(list(only))
        out.mkdir(parents=True, exist_ok=True)
        step = next(s for s in plan.steps if s.name == only[0])
        if only[0] == "gpm_batch_w1":
            return None  # a run that did not finish (e.g. out of time)
        shutil.copy(datasets.data_dir() / "h200" / step.out, out / step.out)
        manifest.register(out, step.name, step.out, step.dataset_kind, "live", "fake")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(live, "run_plan", fake_run_plan)
    yield live.live_root("h200", out=tmp_path / "live"), calls


def test_live_collects_a_plan_dataset_once_then_reads_it(gpu_live, tmp_path):
    root, calls = gpu_live
    assert isinstance(root, DataRoot) and root.info("ncu_batch_w1")["kind"] == "ncu"
    df = root.load("ncu_batch_w1")
    assert calls == [["ncu_batch_w1"]] and df.attrs["dataset"] == "live/ncu_batch_w1"
    assert (tmp_path / "live" / "ncu_batch_w1.parquet").exists()
    root.load("ncu_batch_w1")
    assert calls == [["ncu_batch_w1"]]  # done: not collected again
    assert root.device_name() == "NVIDIA H200"  # the copied table's provenance


def test_live_falls_back_to_the_base_root_for_tables_the_plan_cannot_make(gpu_live):
    root, calls = gpu_live
    df = root.load("profile_layers")
    assert calls == [] and df.attrs["dataset"] == "h200/profile_layers"


def test_live_has_every_plan_step_and_the_base_root(gpu_live, make_root, monkeypatch):
    root, _ = gpu_live
    sub = live.live_root(
        open_root(make_root("sub", ["ceilings"])),
        plan=datasets.data_dir() / "plans" / "full.yaml",
        out=root.path,
    )
    assert sub.has("sweep_bf16_nhwc")  # not in the base root, but the plan collects it
    assert sub.has("ceilings") and not sub.has("profile_layers")
    assert not sub.has("neither_shipped_nor_planned")
    assert "sweep_bf16_nhwc" in sub.names() and "ceilings" in sub.names()
    with pytest.raises(UserError, match="no dataset 'neither_shipped_nor_planned'"):
        sub.load("neither_shipped_nor_planned")


def test_live_run_that_did_not_finish_is_one_clear_error(gpu_live):
    root, _ = gpu_live
    with pytest.raises(UserError, match="did not finish"):
        root.load("gpm_batch_w1")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without a GPU")
def test_live_on_a_gpu_plan_without_a_gpu_says_so():
    with pytest.raises(NotAvailableError, match="LIVE = False"):
        live.live_root("h200")


def test_live_root_collects_for_real_on_the_cpu(tmp_path):
    """A one-point CPU sweep plan: load runs it here (real torch, no fakes), then reads it."""
    plan = tmp_path / "tiny.yaml"
    plan.write_text(
        "name: tiny\ndevice: cpu\nsteps:\n"
        "  - {name: sweep_tiny, kind: sweep, out: sweep_tiny.parquet, description: one point,\n"
        "     params: {family: yolov8, widths: [0.0625], precisions: [fp32], layouts: [nchw],\n"
        "              batches: [1], imgsz: [64], warmup_ms: 5, budget_ms: 20}}\n"
    )
    root = live.live_root(None, plan=plan, out=tmp_path / "here")
    assert root.machine()["cpu_model"] and not root.entries()  # this machine, nothing yet
    assert root.has("sweep_tiny") and not root.has("ceilings")
    df = root.load("sweep_tiny")
    assert len(df) == 1 and df.status.iloc[0] == "ok" and df.attrs["dataset"] == "here/sweep_tiny"
    other = live.live_root(None, plan=plan, out=tmp_path / "elsewhere")
    assert not other.entries()  # each root keeps its own folder: no state shared between them


def test_numerics_step_writes_and_registers_its_table(tmp_path):
    """The plan step kind numerics on a tiny model: numerics.parquet with provenance, registered
    with the step's params; an unknown param is one clear error."""
    from yolo_sm.core.plans import run_plan

    params = {"widths": [0.0625], "precisions": ["bf16"], "photo_precisions": ["fp8"]}
    params |= {"box_precisions": ["fp8"], "imgsz": 64, "photo_imgsz": 64, "seeds": [1]}
    step = {"name": "numerics", "kind": "numerics", "out": "numerics.parquet", "params": params}
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"name: t\ndevice: cpu\nsteps: [{step}]\n".replace("'", '"'))
    run_plan(load_plan(plan), tmp_path / "out", progress=False)
    root = open_root(tmp_path / "out")
    num = root.load("numerics")
    assert root.info("numerics")["params"] == params and root.device_name()
    assert set(num.metric) == {"rel_err", "boxes"}
    assert set(num[num.input == "random"].precision) == {"fp32", "bf16"}
    photos = num[(num.input == "photo") & (num.metric == "rel_err")]
    assert len(photos) == 2  # fp8, as built and with the class prior
    assert num.prov_torch.notna().all()
    bad = tmp_path / "bad.yaml"
    bad.write_text(plan.read_text().replace('"seeds"', '"seed_list"'))
    with pytest.raises(UserError, match="seed_list"):
        run_plan(load_plan(bad), tmp_path / "bad", progress=False)


def test_a_corrupted_dataset_is_an_error_not_wrong_numbers(tmp_path, monkeypatch):
    """datasets.load verifies page checksums: a flipped byte that an unverified read takes as
    other numbers ends in one sentence naming the dataset."""
    import numpy as np

    from tests.test_store import _silent_flips
    from yolo_sm.contract.store import write_atomic

    folder = tmp_path / "m"
    folder.mkdir()
    rng = np.random.default_rng(1)
    n = 500
    df = pd.DataFrame(
        {"ceiling": ["matmul_fp16"] * n, "value": rng.random(n), "unit": "x", "median_ms": 1.0}
    )
    write_atomic(df, folder / "c.parquet", {})
    manifest.register(folder, "c", "c.parquet", "ceilings", "test", "cmd")
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    assert open_root("m").load("c").value.tolist() == df.value.tolist()
    bad = _silent_flips(folder / "c.parquet", tmp_path)
    assert bad
    bad[0].replace(folder / "c.parquet")
    with pytest.raises(UserError, match="dataset m/c cannot be read") as err:
        open_root("m").load("c")
    assert len(str(err.value).splitlines()) == 1


def test_live_data_goes_to_one_folder_per_gpu_model(tmp_path, monkeypatch):
    """Unless told where, live collection writes under results/live in a folder named after
    this machine's GPU model (cpu without one), so a checkout run on two GPU models keeps two
    folders instead of stopping at the second (collect takes one model's rows per folder)."""
    from yolo_sm.core import provenance

    plan = tmp_path / "tiny.yaml"
    plan.write_text(
        "name: tiny\ndevice: cpu\nsteps:\n"
        "  - {name: c, kind: ceilings, out: c.parquet, description: ceilings}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(live, "gpu_name", provenance.gpu_name)
    root = live.live_root(None, plan=plan)
    assert root.path == (tmp_path / "results" / "live" / "cpu").resolve()
    monkeypatch.setattr(live, "gpu_name", lambda device: "NVIDIA H100 80GB HBM3")
    assert live.machine_folder("cuda") == "nvidia-h100-80gb-hbm3"
    assert live.live_root(None, plan=plan).name == "nvidia-h100-80gb-hbm3"
    assert live.live_root(None, plan=plan, out=tmp_path / "mine").name == "mine"

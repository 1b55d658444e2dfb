"""Shipped datasets load by name, carry their columns and provenance; loaders fail clearly."""

import pandas as pd
import pytest

from yolo_sm.collect import live as live_data
from yolo_sm.contract import datasets, manifest
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import SCHEMAS, validate


def test_every_shipped_dataset_loads_with_columns_and_provenance():
    listing = datasets.list_datasets()
    assert "h200/foundation_sweep" in set(listing.name)
    for name in listing.name:
        df = datasets.load(name)
        entry = datasets.info(name)
        assert len(df) == entry["rows"] > 0
        prov = df.attrs["provenance"]
        for key in ("gpu_name", "driver", "cuda", "torch", "cudnn", "ultralytics", "date_utc_last"):
            assert prov.get(key), f"{name} lacks provenance {key}"
        assert entry["command"]


def test_foundation_sweep_is_complete_and_sane():
    df = datasets.load("h200/foundation_sweep")
    assert len(df) == 3 * 2 * 2 * 3 * 3 and (df.status == "ok").all()
    assert df.duplicated(["width", "precision", "layout", "backend", "batch"]).sum() == 0
    assert (df.prov_gpu_name == "NVIDIA H200").all() and (df.prov_sm_count == 132).all()
    # every row keeps its raw samples, and the median is theirs
    for _, r in df.sample(10, random_state=0).iterrows():
        assert len(r.samples_ms) == r.n_samples
        assert r.median_ms == pytest.approx(pd.Series(r.samples_ms).median())
    assert (df.rel_err <= df.precision.map({"fp32": 1e-3, "fp16": 2e-2})).all()


def test_unknown_dataset_names_the_known_ones():
    with pytest.raises(UserError, match="h200/foundation_sweep"):
        datasets.load("h200/nope")
    with pytest.raises(UserError, match="h200/foundation_sweep"):
        datasets.path("h200/nope")
    entry = datasets.info("h200/ceilings")
    assert datasets.path("h200/ceilings") == datasets.data_dir() / "h200" / entry["file"]


def test_validate_names_missing_columns():
    df = pd.DataFrame({"family": ["yolov8"], "width": [1.0]})
    with pytest.raises(ValueError, match="median_ms"):
        validate(df, "sweep", "mine")


def test_register_and_corrupt_file(tmp_path, monkeypatch):
    src = datasets.load("h200/foundation_sweep")
    folder = tmp_path / "m"
    folder.mkdir()
    src.head(3).to_parquet(folder / "s.parquet")
    entry = manifest.register(folder, "s", "s.parquet", "sweep", "three rows", "cmd")
    assert entry["rows"] == 3 and entry["provenance"]["gpu_name"] == "NVIDIA H200"
    assert set(SCHEMAS["sweep"]) & set(src.columns) <= set(entry["columns"])  # each described
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    assert len(datasets.load("m/s")) == 3
    (folder / "s.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(UserError, match="cannot be read"):
        datasets.load("m/s")
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(UserError, match="manifest"):
        datasets.list_datasets()


# --- live collection: LIVE = True in a notebook on a GPU machine -----------------------------


@pytest.fixture
def live(monkeypatch, tmp_path):
    """go_live with torch told there is a GPU and the plan runner replaced by a copy of the
    shipped table (what a real run would register), counting its calls."""
    import shutil

    import torch

    from yolo_sm.collect import plans as collect

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
    monkeypatch.setattr(collect, "run_plan", fake_run_plan)
    live_data.go_live(out=tmp_path / "live")
    yield calls
    live_data.stop_live()


def test_live_collects_a_plan_dataset_once_then_reads_it(live, tmp_path):
    df = live_data.load("h200/ncu_batch_w1")
    assert live == [["ncu_batch_w1"]] and df.attrs["dataset"] == "live/ncu_batch_w1"
    assert (tmp_path / "live" / "ncu_batch_w1.parquet").exists()
    live_data.load("h200/ncu_batch_w1")
    assert live == [["ncu_batch_w1"]]  # done: not collected again


def test_live_falls_back_to_shipped_for_tables_the_plan_cannot_make(live):
    df = live_data.load("h200/profile_layers")
    assert live == [] and df.attrs["dataset"] == "h200/profile_layers"


def test_live_makes_every_plan_step_available(live, monkeypatch):
    shipped = datasets.manifests()
    shipped.pop("h200/sweep_bf16_nhwc", None)
    monkeypatch.setattr(datasets, "manifests", lambda: shipped)  # as if that step were not shipped
    # not shipped, but the plan has its step: live, a notebook collects it instead of skipping
    assert live_data.is_available("h200/sweep_bf16_nhwc")
    assert not live_data.is_available("h200/neither_shipped_nor_planned")
    assert live_data.is_available("h200/profile_layers")  # shipped only
    live_data.stop_live()
    assert not live_data.is_available("h200/sweep_bf16_nhwc")


def test_live_run_that_did_not_finish_is_one_clear_error(live):
    with pytest.raises(UserError, match="did not finish"):
        live_data.load("h200/gpm_batch_w1")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without a GPU")
def test_go_live_without_a_gpu_says_so():
    from yolo_sm.contract.errors import NotAvailableError

    with pytest.raises(NotAvailableError, match="LIVE = False"):
        live_data.go_live()
    assert live_data.load("h200/ncu_batch_w1").attrs["dataset"] == "h200/ncu_batch_w1"


def test_load_many_concatenates_the_available_and_names_the_rest():
    names = ["h200/ceilings", "h200/not_collected_yet", "h200/sweep_1280"]
    assert live_data.is_available("h200/ceilings") and not live_data.is_available(names[1])
    df = datasets.load_many(names)
    assert df.attrs["datasets"] == [names[0], names[2]]
    assert df.attrs["not_available"] == [names[1]]
    assert len(df) == len(live_data.load(names[0])) + len(live_data.load(names[2]))
    assert set(df.dataset) == {names[0], names[2]}
    prov = df.attrs["provenance_by_dataset"]
    assert prov[names[2]]["gpu_name"] == "NVIDIA H200"
    with pytest.raises(UserError, match="none of h200/x, h200/y"):
        datasets.load_many(["h200/x", "h200/y"])
    msg = datasets.not_shipped_message("h200/sweep_bf16_nhwc")
    assert msg.endswith("--out data/h200 --only sweep_bf16_nhwc")

"""yolo_sm.core.model_tables: the model_layers dataset (counted on the CPU), its plan step
kind and the shipped table."""

import json

import pandas as pd
import pytest

from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import load_plan
from yolo_sm.contract.schema import REQUIRED, validate
from yolo_sm.core import model_tables
from yolo_sm.core.models import build_yolo, channel_table
from yolo_sm.core.plans import run_plan


def test_layer_rows_match_the_channel_table():
    rows = model_tables.layer_rows("yolov8", 0.0625, imgsz=320)
    ct = channel_table(build_yolo("yolov8", 0.0625, calibrate=False), 320)
    assert list(rows.columns) == list(model_tables.COLUMNS)
    validate(rows, "model_tables")
    assert len(rows) == len(ct) == 23
    assert (rows.flops.to_numpy() == ct.flops.to_numpy()).all()
    assert (rows.out_bytes.to_numpy() == ct.activation_bytes.to_numpy()).all()
    assert (rows.weight_bytes == 2 * rows.params).all()
    assert (rows.min_bytes == rows.weight_bytes + rows.in_bytes + rows.out_bytes).all()
    assert (rows.conv_bytes == rows.conv_io_bytes + rows.conv_weight_bytes).all()
    assert (rows.batch == 1).all() and (rows.imgsz == 320).all()
    assert (rows.model == "yolov8").all() and (rows.max_channels == 2048).all()
    # fp32: every byte column doubles, FLOPs do not move
    f32 = model_tables.layer_rows("yolov8", 0.0625, imgsz=320, bytes_per_element=4)
    assert (f32.min_bytes == 2 * rows.min_bytes).all() and (f32.flops == rows.flops).all()


def test_model_layers_of_several_models():
    df = model_tables.model_layers(
        [{"model": "yolov8", "widths": [0.0625, 0.125]}, {"model": "wide", "widths": [0.25]}],
        imgsz=160,
    )
    assert df.groupby(["model", "width"]).size().to_dict() == {
        ("wide", 0.25): 8,
        ("yolov8", 0.0625): 23,
        ("yolov8", 0.125): 23,
    }
    wide = df[df.model == "wide"]
    assert wide.depth.isna().all() and wide.max_channels.isna().all()
    assert set(wide.stage) == {"stage0", "stage1", "stage2", "stage3"}
    with pytest.raises(UserError, match="needs 'model'"):
        model_tables.model_layers([{"widths": [1.0]}])
    with pytest.raises(UserError):
        model_tables.model_layers([])


def test_plan_step_writes_and_registers_the_table(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "name: t\ndevice: cuda\nsteps:\n"
        "  - {name: model_layers, kind: model_tables, out: model_layers.parquet,\n"
        "     description: tiny, params: {imgsz: 160,\n"
        "     models: [{model: yolov8, widths: [0.0625]}]}}\n"
    )
    out = tmp_path / "root"
    status = run_plan(load_plan(plan), out, progress=False)
    assert status.set_index("step").state["model_layers"] == "done"
    entry = json.loads((out / "manifest.json").read_text())["datasets"]["model_layers"]
    assert entry["kind"] == "model_tables" and entry["rows"] == 23
    prov = entry["provenance"]
    assert "gpu_name" not in prov and prov.get("torch")  # counted on this CPU, which it says
    root = open_root(out)
    df = root.load("model_layers")
    assert len(df) == 23 and df.prov_device.eq("cpu").all()
    assert root.device_name() != "root" and "H200" not in root.device_name()


def test_the_shipped_table_is_a_recount():
    root = open_root("h200")
    df = root.load("model_layers")
    assert root.path.joinpath(root.info("model_layers")["file"]).stat().st_size < 1_000_000
    assert set(REQUIRED["model_tables"]) <= set(df.columns)
    w = df[(df.model == "yolov8") & (df.width == 0.25) & (df.max_channels == 2048)]
    fresh = model_tables.layer_rows("yolov8", 0.25)
    cols = ["layer", "flops", "params", "min_bytes", "conv_bytes", "out_channels"]
    pd.testing.assert_frame_equal(
        w[cols].reset_index(drop=True), fresh[cols].reset_index(drop=True), check_dtype=False
    )
    # the models the notebooks read
    have = set(zip(df.model, df.width, df.max_channels.fillna(0), strict=True))
    assert ("yolov8", 1.25, 512) in have and ("resnet101", 1.0, 0) in have
    assert {w for m, w, _ in have if m == "wide"} == {1.0, 1.25, 1.5, 1.75, 2.0}

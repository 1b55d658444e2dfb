"""GPU test of a model the user brings (marker ``gpu``; ``pytest -m gpu``): an ultralytics
checkpoint saved here, loaded back through the checkpoint path, then a sweep point, a trace
with per-layer attribution and an Nsight Compute occupancy pass on it."""

import pytest
import torch  # noqa: F401 - GPU tests need torch

from yolo_sm.core.environment import find_ncu

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from yolo_sm.core.models import save_checkpoint

    return str(save_checkpoint("yolov8:0.25", tmp_path_factory.mktemp("ckpt") / "det.pt"))


def test_checkpoint_sweep_point_on_gpu(ckpt, tmp_path):
    from yolo_sm.core.sweep import SweepSpec, run_sweep

    spec = SweepSpec.from_mapping(
        {
            "models": ckpt,
            "device": "cuda",
            "precisions": "fp16",
            "layouts": "nhwc",
            "batches": "8",
            "imgsz": "640",
            "budget_ms": 100,
            "warmup_ms": 20,
        }
    )
    df = run_sweep(spec, tmp_path / "s.parquet", progress=False)
    row = df.iloc[0]
    assert len(df) == 1 and row.status == "ok", row.message
    assert row.family == "det" and row.model == ckpt and not row.bn_calibrated
    assert row.width == 0.25 and row.img_per_s > 0 and row.rel_err < 0.05
    assert row.prov_nvml_index >= 0 and str(row.prov_gpu_uuid).startswith("GPU-")


def test_checkpoint_trace_attributes_kernels_to_layers(ckpt, tmp_path):
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.models import build_spec, layers
    from yolo_sm.core.profiling import kineto

    model = build_spec(ckpt)
    names = {r.name for r in layers(model)}
    eng = build_engine(model, EngineConfig(precision="fp16", layout="nhwc", batch=8))
    x = eng.make_input(0)
    path = kineto.capture(lambda: eng(x), tmp_path / "t.json.gz", model=eng.module, iters=2)
    fwd = kineto.load_kernels(path).dropna(subset=["iteration"])
    assert len(fwd) > 100 and (fwd.layer != "").all()
    assert set(fwd.layer) <= names and set(fwd.stage) == {"backbone", "neck", "head"}


@pytest.mark.skipif(find_ncu() is None, reason="Nsight Compute not installed")
def test_checkpoint_ncu_pass_per_layer(ckpt, tmp_path):
    from yolo_sm.core.profiling import ncu
    from yolo_sm.core.profiling.target import target_argv

    argv = target_argv("yolov8", "1.0", "fp16", "nhwc", "1", 640, "cuda", models=[ckpt])
    df = ncu.profile(argv, tmp_path / "n.csv", metric_set="occupancy", timeout_s=300)
    assert len(df) > 100 and (df.layer != "").all()
    assert set(df.config) == {"det_w0.25_fp16_nhwc_b1"}
    assert df.achieved_occupancy_pct.notna().all()


def test_provenance_and_gpm_name_the_gpu_the_run_uses(ckpt):
    from yolo_sm.core.devices import identify
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.models import build_spec
    from yolo_sm.core.profiling.suite import run_gpm
    from yolo_sm.core.provenance import collect

    ident = identify("cuda")
    assert ident["nvml_match"] in ("uuid", "pci_bus_id") and ident["nvml_index"] is not None
    prov = collect("cuda")
    assert prov["gpu_uuid"] == ident["gpu_uuid"] and prov["nvml_index"] == ident["nvml_index"]
    eng = build_engine(build_spec(ckpt), EngineConfig(precision="fp16", layout="nhwc", batch=8))
    try:
        frame, info = run_gpm([("det", eng, eng.make_input(0))], seconds=0.5, gap_s=0.1)
    finally:
        eng.close()
    assert info["gpu_index"] == ident["nvml_index"] and len(frame) > 0

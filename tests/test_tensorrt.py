"""TensorRT backend and image loading.

CPU tests: the plan cache key, image loading/letterboxing, and the errors without TensorRT or a
GPU. ``gpu`` tests build real engines; they skip without TensorRT and CUDA.
"""

from __future__ import annotations

import dataclasses
import importlib
import shutil
import sys

import cv2
import numpy as np
import pytest
import torch

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.images import bundled_images, load_images

GREY = 114 / 255  # ultralytics' letterbox padding value, scaled to [0, 1]


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.SiLU()).eval()


# ---------------------------------------------------------------- engine cache key (CPU)


def _key(onnx=b"onnx-bytes", gpu="NVIDIA H200 sm_90", trt="10.8.0", digest="", **cfg):
    from yolo_sm.core.engines.tensorrt import engine_cache_key

    base = dict(backend="tensorrt", precision="fp16", batch=1, imgsz=640, workspace_mb=4096)
    return engine_cache_key(onnx, EngineConfig(**{**base, **cfg}), gpu, trt, digest)


def test_cache_key_is_stable_and_ignores_unrelated_fields():
    key = _key()
    assert key == _key()
    assert len(key) == 64 and int(key, 16) >= 0
    # runtime-only settings do not change the plan
    assert _key(layout="nchw") == key
    assert _key(check=False, cudnn_benchmark=False, cache_dir="/elsewhere") == key
    # the calibration source only matters for int8
    assert _key(calib_images="/some/folder") == key


@pytest.mark.parametrize(
    "change",
    [
        {"onnx": b"onnx-bytes!"},
        {"gpu": "NVIDIA H100 80GB HBM3 sm_90"},
        {"gpu": "NVIDIA H200 sm_89"},
        {"trt": "10.9.0"},
        {"precision": "fp32"},
        {"precision": "int8"},
        {"batch": 2},
        {"imgsz": 320},
        {"workspace_mb": 1024},
    ],
)
def test_cache_key_changes_with_each_input(change):
    assert _key(**change) != _key()


def test_cache_key_int8_depends_on_calibration_source_and_images():
    key = _key(precision="int8")
    assert _key(precision="int8") == key
    assert _key(precision="int8", calib_images="/data/calib") != key
    assert _key(precision="int8", calib_images="/data/calib") != _key(
        precision="int8", calib_images="/data/other"
    )
    assert _key(precision="int8", digest="abc") != key


# ---------------------------------------------------------------- images (CPU)


def test_bundled_images_exist():
    paths = bundled_images()
    assert [p.name for p in paths] == ["bus.jpg", "zidane.jpg"]
    assert all(p.is_file() for p in paths)


def test_load_bundled_images_letterboxed():
    x = load_images()
    assert x.shape == (2, 3, 640, 640) and x.dtype == np.float32
    assert x.min() >= 0.0 and x.max() <= 1.0
    # bus.jpg is portrait (810x1080): grey bars left and right; zidane.jpg is landscape
    # (1280x720): grey bars top and bottom; the middle is picture, not padding.
    np.testing.assert_allclose(x[0, :, :, :40], GREY, atol=1e-6)
    np.testing.assert_allclose(x[0, :, :, -40:], GREY, atol=1e-6)
    np.testing.assert_allclose(x[1, :, :100, :], GREY, atol=1e-6)
    np.testing.assert_allclose(x[1, :, -100:, :], GREY, atol=1e-6)
    for img in x:
        assert img[:, 200:440, 200:440].std() > 0.1


def test_load_single_file_converts_bgr_to_rgb_and_pads(tmp_path):
    red = np.zeros((32, 64, 3), np.uint8)
    red[..., 2] = 255  # BGR order: pure red
    path = tmp_path / "red.png"
    assert cv2.imwrite(str(path), red)
    x = load_images(path, imgsz=64)
    assert x.shape == (1, 3, 64, 64) and x.dtype == np.float32
    picture = x[0, :, 24:40, :]  # 64x32 scaled 1:1 into the middle rows
    np.testing.assert_allclose(picture[0], 1.0)  # R
    np.testing.assert_allclose(picture[1:], 0.0)  # G, B
    np.testing.assert_allclose(x[0, :, :16, :], GREY, atol=1e-6)


def test_load_folder_takes_images_only(tmp_path):
    shutil.copy(bundled_images()[0], tmp_path / "b.jpg")
    (tmp_path / "notes.txt").write_text("not an image")
    x = load_images(tmp_path, imgsz=320)
    assert x.shape == (1, 3, 320, 320)
    np.testing.assert_allclose(x, load_images(bundled_images()[0], imgsz=320))


def test_empty_or_missing_folder_and_bad_image_raise(tmp_path):
    with pytest.raises(UserError, match=str(tmp_path)):
        load_images(tmp_path)
    missing = tmp_path / "nope"
    with pytest.raises(UserError, match="nope"):
        load_images(missing)
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"this is not a jpeg")
    with pytest.raises(UserError, match="broken.jpg"):
        load_images(tmp_path)


# ---------------------------------------------------------------- without TensorRT / GPU (CPU)


def test_module_imports_and_reports_missing_tensorrt(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # makes `import tensorrt` fail
    mod = importlib.import_module("yolo_sm.core.engines.tensorrt")
    cfg = EngineConfig(backend="tensorrt", precision="fp16", device="cuda", imgsz=64)
    with pytest.raises(NotAvailableError, match="TensorRT is not installed"):
        mod.build_tensorrt(tiny_model(), cfg)


def test_build_on_cpu_is_not_available():
    cfg = EngineConfig(backend="tensorrt", precision="fp16", device="cpu", imgsz=64)
    with pytest.raises(NotAvailableError, match="GPU"):
        build_engine(tiny_model(), cfg)


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_float_formats_tensorrt_does_not_build(precision):
    cfg = EngineConfig(backend="tensorrt", precision=precision, device="cpu", imgsz=64)
    with pytest.raises(UserError, match=precision) as err:
        build_engine(tiny_model(), cfg)
    assert not isinstance(err.value, NotAvailableError)


# ---------------------------------------------------------------- real engines (GPU + TensorRT)


@pytest.fixture
def trt_config(tmp_path):
    pytest.importorskip("tensorrt")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return EngineConfig(
        backend="tensorrt",
        precision="fp16",
        layout="nchw",
        batch=2,
        imgsz=64,
        device="cuda",
        workspace_mb=512,
        cache_dir=str(tmp_path),
    )


@pytest.mark.gpu
def test_fp16_engine_builds_and_caches(trt_config, tmp_path):
    model = tiny_model()
    engine = build_engine(model, trt_config)
    try:
        assert engine.description == "tensorrt fp16"
        assert engine.rel_err is not None and engine.rel_err <= trt_config.tolerance
        assert engine.info["cache_hit"] is False
        assert (tmp_path / "tensorrt").is_dir()
        assert list((tmp_path / "tensorrt").glob("timing-*.cache"))
        out = engine(engine.make_input())
        assert out.shape == (2, 8, 64, 64) and out.dtype == torch.float32 and out.is_cuda

    finally:
        engine.close()

    again = build_engine(model, trt_config)
    try:
        assert again.info["cache_hit"] is True
        assert again.info["engine_path"] == engine.info["engine_path"]
        assert again.rel_err <= trt_config.tolerance
    finally:
        again.close()


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_fp32_and_int8_engines_within_tolerance(trt_config, tmp_path, precision):
    cfg = dataclasses.replace(trt_config, precision=precision)
    engine = build_engine(tiny_model(), cfg)
    try:
        assert engine.rel_err <= cfg.tolerance
        if precision == "int8":  # calibrated on the bundled images; the cache is kept
            assert list((tmp_path / "tensorrt").glob("*.calib"))
    finally:
        engine.close()

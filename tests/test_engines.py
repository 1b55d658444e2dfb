"""CPU engines: config validation, eager precisions/layouts, the numerical check, ONNX Runtime.

torch.compile's inductor is not run here: on two CPU cores it takes minutes (GPU tests cover
it); its build bookkeeping is, with dynamo's eager backend.
"""

import copy
from pathlib import Path

import pytest
import torch

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.core.engines import (
    TOLERANCE,
    EngineConfig,
    NumericalMismatch,
    Precision,
    build_engine,
    make_input,
    relative_l2,
)
from yolo_sm.core.engines import config as config_module

ANCHORS_64 = 64 + 16 + 4
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def cpu_config(**kw):
    base = dict(batch=2, imgsz=64, device="cpu")
    return EngineConfig(**{**base, **kw})


# --- EngineConfig ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"backend": "tensorflow"},
        {"precision": "fp4"},
        {"layout": "nwhc"},
        {"batch": 0},
        {"batch": -1},
        {"batch": 1.5},
        {"imgsz": 65},
        {"imgsz": 0},
        {"imgsz": -32},
        {"compile_mode": "fastest"},
        {"device": "tpu"},
        {"precision": "int8", "backend": "onnxruntime"},
        {"precision": "int8", "backend": "compile", "int8_kernel": "triton"},
    ],
)
def test_config_validation(kwargs):
    with pytest.raises(UserError):
        EngineConfig(**kwargs)


def test_config_normalises_enums():
    cfg = EngineConfig(backend="EAGER", precision="BF16", layout="NCHW", device="cpu", batch=4)
    assert cfg.precision is Precision.BF16
    assert cfg.tolerance == TOLERANCE[Precision.BF16]
    assert cfg.label() == "eager/bf16/nchw/b4"
    assert EngineConfig(precision="int8", backend="tensorrt").precision is Precision.INT8


# --- inputs and the error measure -----------------------------------------------------------


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_make_input(precision, layout):
    cfg = cpu_config(precision=precision, layout=layout)
    x = make_input(cfg, seed=0)
    assert x.shape == (2, 3, 64, 64) and x.dtype == DTYPES[precision]
    assert x.is_contiguous(memory_format=torch.channels_last) == (layout == "nhwc")
    assert 0 <= x.min() and x.max() <= 1 and x.float().std() > 0.2
    assert torch.equal(x, make_input(cfg, seed=0))
    assert not torch.equal(x, make_input(cfg, seed=1))


@pytest.mark.parametrize(
    "out, ref, expected",
    [
        ([1.0, 2.0], [1.0, 2.0], 0.0),
        ([1.1, 2.2], [1.0, 2.0], 0.1),
        ([0.0, 0.0], [3.0, 4.0], 1.0),
        ([float("nan"), 1.0], [1.0, 1.0], float("inf")),
        ([1.0, float("inf")], [1.0, 1.0], float("inf")),
        ([1.0, 1.0], [0.0, 0.0], float("inf")),
    ],
)
def test_relative_l2(out, ref, expected):
    assert relative_l2(torch.tensor(out), torch.tensor(ref)) == pytest.approx(expected)


def test_relative_l2_shape_mismatch():
    with pytest.raises(NumericalMismatch):
        relative_l2(torch.zeros(2, 3), torch.zeros(3, 2))


# --- eager engines --------------------------------------------------------------------------


def _snapshot(model):
    return {
        k: (
            v.dtype,
            v.device,
            v.is_contiguous(),
            v.is_contiguous(memory_format=torch.channels_last) if v.dim() == 4 else None,
            v.clone(),
        )
        for k, v in model.state_dict().items()
    }


def test_the_check_runs_on_the_photos_not_on_noise(tiny_yolo):
    """verify's rel_err is the error on the bundled photos (the images the random models'
    BatchNorm statistics are calibrated on), which differs from the error on noise."""
    from yolo_sm.core.engines.base import (
        CHECK_INPUT,
        head_tensor,
        make_input,
        photo_input,
        reference_output,
        relative_l2,
    )

    eng = build_engine(tiny_yolo, cpu_config(precision="bf16"))
    cfg = eng.config
    with torch.no_grad():
        photos = photo_input(cfg)
        on_photos = relative_l2(head_tensor(eng(photos)), reference_output(tiny_yolo, cfg, photos))
        noise = make_input(cfg, 1)
        on_noise = relative_l2(head_tensor(eng(noise)), reference_output(tiny_yolo, cfg, noise))
    assert CHECK_INPUT == "photos"
    assert eng.rel_err == pytest.approx(on_photos, rel=1e-6)
    assert abs(on_noise - on_photos) > 1e-3 * on_photos


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_eager_engine(tiny_yolo, precision, layout):
    before = _snapshot(tiny_yolo)
    eng = build_engine(tiny_yolo, cpu_config(precision=precision, layout=layout))
    assert eng.rel_err is not None and eng.rel_err <= eng.config.tolerance
    if precision != "fp32":
        assert eng.rel_err > 1e-6, "reduced precision should not be bit-identical to fp32"
    else:
        assert eng.rel_err < 1e-5
    x = eng.make_input(seed=3)
    assert x.dtype == eng.input_dtype == DTYPES[precision]
    out = eng(x)
    assert out.dtype == DTYPES[precision]
    assert out.shape == (2, 64 + 80, ANCHORS_64)
    assert torch.isfinite(out.float()).all()
    # the source model is untouched: dtype, device, memory format and values
    after = _snapshot(tiny_yolo)
    assert after.keys() == before.keys()
    for k, (dtype, dev, contig, cl, value) in before.items():
        a = after[k]
        assert (a[0], a[1], a[2], a[3]) == (dtype, dev, contig, cl), k
        assert torch.equal(a[4], value), k
    assert all(p.dtype == torch.float32 for p in tiny_yolo.parameters())
    eng.close()


def test_eager_output_matches_model(tiny_yolo):
    eng = build_engine(tiny_yolo, cpu_config(precision="fp32", layout="nchw"))
    x = eng.make_input(seed=5)
    with torch.no_grad():
        ref = tiny_yolo(x)
    assert torch.allclose(eng(x), ref, rtol=1e-5, atol=1e-5)


def test_numerical_mismatch_beyond_tolerance(tiny_yolo, monkeypatch):
    monkeypatch.setitem(config_module.TOLERANCE, Precision.BF16, 1e-12)
    with pytest.raises(NumericalMismatch, match="tolerance"):
        build_engine(tiny_yolo, cpu_config(precision="bf16", layout="nchw"))
    eng = build_engine(tiny_yolo, cpu_config(precision="bf16", layout="nchw", check=False))
    assert eng.rel_err is None


def test_compiled_build_times_its_first_call_apart(tiny_yolo, tmp_path, monkeypatch):
    """compile_s spans the build's compiling calls; compile_first_s is the first of them (the
    trace and compile), a share of it. Dynamo's eager backend stands in for inductor."""
    from yolo_sm.core.engines import compile_cache

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, **kw: real(m, backend="eager"))
    # inductor's cache folder and switches are process-wide: leave them as they are
    monkeypatch.setattr(compile_cache, "setup", lambda cache_dir=None: {"dir": str(tmp_path)})
    eng = build_engine(
        tiny_yolo,
        cpu_config(backend="compile", precision="fp32", cache_dir=str(tmp_path), check=False),
    )
    first, whole = eng.info["compile_first_s"], eng.info["compile_s"]
    assert 0 < first <= whole and eng.info["recompiles"] == 0
    eng(eng.make_input(1))
    eng.close()


def test_cudagraph_on_cpu_not_available(tiny_yolo):
    with pytest.raises(NotAvailableError):
        build_engine(tiny_yolo, cpu_config(backend="cudagraph", precision="fp32"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
@pytest.mark.parametrize("backend", ["eager", "cudagraph", "onnxruntime"])
def test_cuda_device_without_gpu(tiny_yolo, backend):
    with pytest.raises(NotAvailableError, match="no CUDA GPU"):
        build_engine(
            tiny_yolo,
            EngineConfig(
                backend=backend, precision="fp32", layout="nchw", batch=1, imgsz=64, device="cuda"
            ),
        )


# --- ONNX Runtime ---------------------------------------------------------------------------


def test_onnxruntime_fp32_and_export_cache(tiny_yolo, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    cfg = cpu_config(
        backend="onnxruntime", precision="fp32", layout="nchw", cache_dir=str(tmp_path)
    )
    eng = build_engine(tiny_yolo, cfg)
    assert eng.rel_err < 1e-4
    path = eng.info["onnx_path"]
    assert path.startswith(str(tmp_path)) and path.endswith(".onnx")
    out = eng(eng.make_input(seed=2))
    assert out.shape == (2, 144, ANCHORS_64) and out.dtype == torch.float32
    assert not [p for p in (tmp_path / "onnx").iterdir() if p.suffix == ".partial"]

    def no_export(*a, **k):
        raise AssertionError("the cached ONNX file should have been reused")

    monkeypatch.setattr(torch.onnx, "export", no_export)
    again = build_engine(tiny_yolo, cfg)
    assert again.info["onnx_path"] == path
    assert again.rel_err == pytest.approx(eng.rel_err)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_onnxruntime_rejects_reduced_precision(tiny_yolo, tmp_path, precision):
    pytest.importorskip("onnxruntime")
    with pytest.raises(UserError, match="fp32"):
        build_engine(
            tiny_yolo,
            cpu_config(
                backend="onnxruntime", precision=precision, layout="nchw", cache_dir=str(tmp_path)
            ),
        )
    assert not (tmp_path / "onnx").exists()  # rejected before exporting anything


def test_failed_onnx_export_leaves_no_file(tiny_yolo, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")

    def half_export(model, args, f, **kw):
        if hasattr(f, "write"):  # an open file
            f.write(b"half an onnx file")
        else:
            Path(f).write_bytes(b"half an onnx file")
        raise RuntimeError("exporter failed")

    monkeypatch.setattr(torch.onnx, "export", half_export)
    cfg = cpu_config(
        backend="onnxruntime", precision="fp32", layout="nchw", cache_dir=str(tmp_path)
    )
    with pytest.raises(RuntimeError, match="exporter failed"):
        build_engine(tiny_yolo, cfg)
    assert list((tmp_path / "onnx").iterdir()) == []


def test_reference_cache_keeps_input_dtypes_apart(tiny_yolo):
    """An fp16 engine's check (fp16-rounded input) must not leave its reference for an fp32
    engine with the same seed (unrounded input), nor the other way round."""
    from yolo_sm.core.engines import EngineConfig, build_engine

    half = build_engine(
        tiny_yolo, EngineConfig(precision="fp16", layout="nhwc", batch=1, imgsz=64, device="cpu")
    )
    full = build_engine(
        tiny_yolo, EngineConfig(precision="fp32", layout="nhwc", batch=1, imgsz=64, device="cpu")
    )
    assert full.rel_err < 1e-5 and half.rel_err > full.rel_err


def test_compiled_int8_modules_differ_by_how_they_quantise(tiny_yolo, monkeypatch):
    """Engines of one model share a compiled module per precision, layout, mode and device;
    int8 engines that quantise differently (hand-off, calibration) do not."""
    from dataclasses import replace

    from yolo_sm.core.engines import torch_backends

    class Compiled:
        def __init__(self, module):
            self._orig_mod = module

    monkeypatch.setattr(torch, "compile", lambda module, **kw: Compiled(module))
    monkeypatch.setattr(torch_backends, "_COMPILED", type(torch_backends._COMPILED)())
    cfg = EngineConfig(backend="compile", precision="int8", device="cpu", batch=1, imgsz=64)
    a = torch_backends._compiled_module(tiny_yolo, cfg)
    assert torch_backends._compiled_module(tiny_yolo, replace(cfg, batch=2)) is a
    b = torch_backends._compiled_module(tiny_yolo, replace(cfg, int8_handoff=False))
    c = torch_backends._compiled_module(tiny_yolo, replace(cfg, int8_calibration="percentile"))
    assert len({id(a), id(b), id(c)}) == 3


def test_copyfree_is_fp16_or_bf16_nhwc_on_a_gpu_only():
    for precision, layout in (("fp32", "nhwc"), ("fp16", "nchw"), ("int8", "nhwc")):
        with pytest.raises(UserError, match="copyfree"):
            EngineConfig(backend="copyfree", precision=precision, layout=layout)
    cfg = EngineConfig(backend="copyfree", precision="fp16", layout="nhwc", device="cpu")
    with pytest.raises(NotAvailableError, match="copyfree needs a CUDA device"):
        build_engine(torch.nn.Conv2d(3, 8, 3), cfg)


def test_copyfree_buffer_plan_reproduces_the_model_without_a_copy(tiny_yolo, monkeypatch):
    """The copy-free engine's plan on the CPU, each convolution run by PyTorch into the tensor
    the cuDNN graph would write: the raw head output equals the model's, every concatenation
    input and head branch landed in its slice (no concat copy), and SPPF's pools ran in place."""
    from torch import nn

    from yolo_sm.core.engines import copyfree

    def conv(self, block, x, y=None, res=None):
        if isinstance(block, nn.Conv2d):
            r = nn.Conv2d.forward(block, x)
        else:  # a fused block (no BatchNorm) as ultralytics runs it
            r = block.forward_fuse(x) if not hasattr(block, "bn") else type(block).forward(block, x)
        r = r if res is None else r + res
        return r if y is None else y.copy_(r)

    pools, heads = [], []
    monkeypatch.setattr(copyfree.CopyFree, "conv", conv)
    monkeypatch.setattr(copyfree, "pool_into", lambda p, x, y: pools.append(1) or y.copy_(p(x)))
    monkeypatch.setattr(copyfree, "pointwise_into",
                        lambda c, x, y, _: heads.append(y) or conv(0, c, x, y) is y)  # fmt: skip
    monkeypatch.setattr(copyfree, "_WINDOW", {False: None})  # no Triton on the CPU: torch's ops
    x = torch.rand(2, 3, 64, 96).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        ref = tiny_yolo(x)
        engine = copyfree.CopyFree(copy.deepcopy(tiny_yolo))  # it binds the head's forwards
        out = engine(x)
        again = engine(x)  # a second forward, on buffers of its own
        assert torch.equal(again, out)
    assert out.shape == ref.shape and torch.allclose(out, ref, atol=1e-5, rtol=1e-4)
    assert engine.concat_copies == 0 and len(pools) == 6  # 3 pools per forward, 2 forwards
    raw = [t for k, t in engine.buffers.items() if k[0][0] == "head"]
    assert len(raw) == 1 and again.data_ptr() == raw[0].data_ptr()  # the output is its buffer
    # each forward's 6 branch ends wrote slices of it: 3 levels x (box, class)
    store = raw[0].untyped_storage().data_ptr()
    assert len(heads) == 12 and {h.untyped_storage().data_ptr() for h in heads[6:]} == {store}


_WINDOW_CHECK = """
import json, torch
from torch import nn
from yolo_sm.core.engines import copyfree as cf
torch.manual_seed(0)
buf = torch.randn(2, 24, 7, 9).half().contiguous(memory_format=torch.channels_last)
for k in (1, 2, 3):  # SPPF's chain: each pool reads the slice before it
    cf.pool_into(nn.MaxPool2d(5, 1, 2), buf[:, 6 * k - 6 : 6 * k], buf[:, 6 * k : 6 * k + 6])
ref, pools = buf[:, :6].float(), []
for k in (1, 2, 3):
    ref = nn.functional.max_pool2d(ref, 5, 1, 2)
    pools.append(torch.equal(ref.half(), buf[:, 6 * k : 6 * k + 6]))
up = torch.zeros(2, 10, 14, 18).half().contiguous(memory_format=torch.channels_last)
cf.window_into(buf[:, 6:12], up[:, 2:8], up=2)
near = nn.functional.interpolate(buf[:, 6:12], scale_factor=2.0, mode="nearest")
x = torch.randn(2, 70, 3, 4).half().contiguous(memory_format=torch.channels_last)
conv = nn.Conv2d(70, 20, 1).half()  # 70 channels: two blocks of 64, the second masked
raw = torch.zeros(2, 12 + 6, 24).half()  # (batch, anchors, channels): a level of 12 anchors
lvl = raw[:, :12].unflatten(1, (3, 4)).permute(0, 3, 1, 2)[:, 2:22]
wrote = cf.pointwise_into(conv, x, lvl, {})
ref = nn.functional.conv2d(x.float(), conv.weight.float(), conv.bias.float())
rest = raw[:, 12:].abs().sum() + raw[:, :, :2].abs().sum() + raw[:, :, 22:].abs().sum()
print(json.dumps({"pools": pools, "up": torch.equal(up[:, 2:8], near),
                  "others": int(up[:, :2].abs().sum() + up[:, 8:].abs().sum()),
                  "kernel": cf._WINDOW[True] is not None,
                  "conv1x1": [wrote, float((lvl.float() - ref).abs().max()) < 2e-2, int(rest)]}))
"""


def test_copyfree_pools_and_upsample_write_into_their_slices():
    """The copy-free engine's Triton kernels (Triton's interpreter): SPPF's chained 5x5 pools read
    and write channel slices of one NHWC buffer as PyTorch's max_pool2d computes them, the
    nearest 2x upsample fills its slice as F.interpolate does and nothing beside it, and the
    head's 1x1 convolution writes conv2d's result into a level's channel slice of a (batch,
    anchors, channels) buffer and nothing beside it."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", _WINDOW_CHECK], capture_output=True, text=True,
                       env=env, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"pools": [True] * 3, "up": True, "others": 0, "kernel": True,
                   "conv1x1": [True, True, 0]}, got  # fmt: skip

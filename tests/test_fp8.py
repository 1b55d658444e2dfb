"""The fp8 path's quantisation (E4M3 rounding, scales, calibration) and its CPU emulation."""

import pytest
import torch

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.core.engines import EngineConfig, build_engine, fp8
from yolo_sm.core.models import build_yolo
from yolo_sm.core.models.common import calibration_batches


def test_fake_quant_rounds_to_e4m3_and_saturates():
    x = torch.tensor([1.0, 1.0625, 1.2, 300.0, 500.0, -1000.0, 0.0])
    q = fp8.fake_quant(x, 1.0)
    # 3 mantissa bits: 1.0625 -> 1.0 (ties to even), 1.2 -> 1.25; |x| > 448 saturates
    assert q.tolist() == [1.0, 1.0, 1.25, 288.0, 448.0, -448.0, 0.0]
    assert fp8.fake_quant(x, 2.0)[4] == 512.0  # the scale moves the range
    assert fp8.fake_quant(x.half(), 1.0).dtype == torch.float16


def test_weight_scales_are_per_output_channel():
    w = torch.zeros(3, 2, 1, 1)
    w[0, 0], w[1, 1], w[2, 0] = 448.0, -4.48, 0.0
    assert torch.allclose(fp8.weight_scales(w), torch.tensor([1.0, 0.01, 1e-12 / 448]))


@pytest.fixture(scope="module")
def model():
    return build_yolo("yolov8", 0.5).eval()


def test_only_hidden_convs_are_quantised(model):
    convs = fp8.eligible_convs(model)
    assert all(c.in_channels > 3 for _, _, c in convs)
    total = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    # left in fp16: the first conv, the six final prediction convs of the head, the DFL conv
    assert len(convs) == total - 1 - 6 - 1


def test_quantised_model_is_close_on_the_calibration_photos(model):
    import copy

    x = calibration_batches(160)[0]
    with torch.no_grad():
        ref = model(x)
    q = copy.deepcopy(model)
    info = fp8.quantize_convs(q, [x])
    assert info["fp8_convs"] == len(fp8.eligible_convs(model)) and info["fp8_kernel"] == "emulate"
    assert sum(isinstance(m, fp8.Fp8Conv) for m in q.modules()) == info["fp8_convs"]
    with torch.no_grad():
        y = q(x)
    err = float((y - ref).norm() / ref.norm())
    assert 1e-4 < err < 0.03  # E4M3 is coarse but calibrated: ~0.7 % measured at width 0.5
    # the stored weights are real E4M3 values with their per-channel scales
    f = next(m for m in q.modules() if isinstance(m, fp8.Fp8Conv))
    assert f.weight_fp8.dtype == torch.float8_e4m3fn
    assert f.weight_fp8.float().abs().amax(dim=(1, 2, 3)).max() == 448


def test_fp8_engine_runs_on_cpu_as_emulation(model):
    eng = build_engine(
        model, EngineConfig(precision="fp8", layout="nhwc", batch=1, imgsz=128, device="cpu")
    )
    assert eng.rel_err is not None and eng.rel_err <= eng.config.tolerance
    assert eng.module.fp8_info["fp8_kernel"] == "emulate"
    eng.close()


def test_fp8_says_plainly_where_it_cannot_run(monkeypatch):
    import builtins
    import sys

    with pytest.raises(UserError, match="eager and cudagraph"):
        EngineConfig(precision="fp8", backend="compile")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NotAvailableError, match="no CUDA device"):
        fp8.choose_kernel("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (8, 0))
    with pytest.raises(NotAvailableError, match="compute capability 8.9"):
        fp8.choose_kernel("cuda")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    real_import = builtins.__import__

    def no_cudnn(name, *a, **k):
        if name == "cudnn":
            raise ImportError("No module named 'cudnn'")
        return real_import(name, *a, **k)

    monkeypatch.delitem(sys.modules, "cudnn", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_cudnn)
    with pytest.raises(NotAvailableError, match="nvidia-cudnn-frontend"):
        fp8.choose_kernel("cuda")


def test_quantize_e4m3_saturates_and_rounds_like_torch():
    x = torch.tensor([0.0, 1.0, -3.3, 1000.0, -1000.0, 0.013])
    q = fp8.quantize_e4m3(x, 0.5)
    assert q.dtype == torch.float8_e4m3fn
    assert q.float().tolist() == pytest.approx([0.0, 2.0, -6.5, 448.0, -448.0, 0.026], rel=0.07)
    assert torch.equal(q.float() * 0.5, fp8.fake_quant(x, 0.5))


def test_cudnn_kernel_fuses_the_blocks_silu(model):
    """With the cuDNN kernel the SiLU of each quantised block moves into the conv (its epilogue),
    and the block's own activation becomes Identity; the emulation leaves both alone."""
    import copy

    x = calibration_batches(64)[0]
    q = copy.deepcopy(model)
    fp8.quantize_convs(q, [x], kernel="cudnn")
    f = [m for m in q.modules() if isinstance(m, fp8.Fp8Conv)]
    assert f and all(m.silu for m in f)
    parents = [p for p in q.modules() if isinstance(getattr(p, "conv", None), fp8.Fp8Conv)]
    assert len(parents) == len(f) and all(isinstance(p.act, torch.nn.Identity) for p in parents)
    e = copy.deepcopy(model)
    fp8.quantize_convs(e, [x], kernel="emulate")
    assert not any(m.silu for m in e.modules() if isinstance(m, fp8.Fp8Conv))
    with torch.no_grad():  # on a CPU the cuDNN kernel's convs run the emulation: same output
        assert torch.allclose(q(x), e(x), atol=1e-5)

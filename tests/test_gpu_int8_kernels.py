"""yolo_sm's own int8 convolutions on a GPU (marker ``gpu``): the Triton implicit GEMM and the
``torch._int_mm`` 1x1 path against the exact emulation, the int8 CUDA-graph engine with the
Triton kernel (its check, every convolution on the kernel), and the int8_kernels step on a tiny
model (its rows)."""

import pytest
import torch
from torch import nn

pytestmark = pytest.mark.gpu


def _conv(c, k, r, stride):
    conv = nn.Conv2d(c, k, r, stride, r // 2).cuda().half()
    with torch.no_grad():  # per-channel scales over three decades, a bias that matters
        conv.weight.mul_(torch.logspace(-2, 1, k, device="cuda").view(-1, 1, 1, 1).half())
        conv.bias.copy_(torch.linspace(-5, 5, k, device="cuda").half())
    x = nn.functional.silu(torch.randn(4, c, 37, 41, device="cuda", dtype=torch.half) * 3)
    return conv, x.contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize(
    "c,k,r,stride", [(64, 128, 3, 1), (48, 96, 3, 2), (128, 64, 1, 1), (40, 24, 3, 1)]
)
def test_triton_int8_conv_matches_the_emulation(c, k, r, stride):
    from yolo_sm.core.engines import int8, int8_triton

    conv, x = _conv(c, k, r, stride)
    scale = float(x.abs().max()) / 127
    real = int8.Int8Conv(conv, scale, "triton", silu=True).cuda()
    emu = int8.Int8Conv(conv, scale, "emulate", silu=True).cuda()
    y, ref = real(x), emu(x)
    assert real.fallback is None and real.ran == "triton"
    assert y.shape == ref.shape and y.dtype == torch.float16
    assert y.is_contiguous(memory_format=torch.channels_last)
    err = float((y.float() - ref.float()).norm() / ref.float().norm())
    print(f"triton int8 {c}->{k} k{r} s{stride}: rel {err:.2e}, tile {int8_triton.last_tile()}")
    assert err < 5e-3
    # the separate quantiser, then the kernel on int8 input: the same values
    w, sc, b = real._operands(x, "packed")
    xq = int8.quantize_int8(x, scale)
    y2 = int8_triton.conv_int8(
        xq, w, sc, b, r=r, s=r, stride=(stride, stride), padding=(r // 2, r // 2), silu=True,
        quantized_input=True,
    )  # fmt: skip
    assert torch.equal(y2, y)


def test_int_mm_1x1_conv_matches_the_emulation_and_3x3_goes_to_cudnn():
    pytest.importorskip("cudnn", reason="needs nvidia-cudnn-frontend")
    from yolo_sm.core.engines import int8

    conv, x = _conv(128, 64, 1, 1)
    scale = float(x.abs().max()) / 127
    real = int8.Int8Conv(conv, scale, "intmm", silu=True).cuda()
    y, ref = real(x), int8.Int8Conv(conv, scale, "emulate", silu=True).cuda()(x)
    assert real.ran == "intmm"
    assert float((y.float() - ref.float()).norm() / ref.float().norm()) < 5e-3
    conv3, x3 = _conv(64, 64, 3, 1)
    three = int8.Int8Conv(conv3, float(x3.abs().max()) / 127, "intmm", silu=True).cuda()
    three(x3)
    assert three.ran is None and three.graph_modes  # cuDNN's graph ran it


def test_int8_cudagraph_engine_with_the_triton_kernel_w05_b8():
    from yolo_sm.core.engines import EngineConfig, build_engine, int8
    from yolo_sm.core.models import build_yolo

    cfg = EngineConfig(
        backend="cudagraph", precision="int8", layout="nhwc", batch=8, imgsz=640,
        device="cuda", int8_kernel="triton",
    )  # fmt: skip
    eng = build_engine(build_yolo("yolov8", 0.5), cfg)
    counts = int8.graph_counts(eng.module)
    print(f"int8 triton cudagraph w0.5 b8: rel_err {eng.rel_err:.4g}, {counts}")
    assert eng.module.int8_info["int8_kernel"] == "triton"
    assert counts["triton"] == counts["int8_convs"] > 0 and counts["fp16"] == 0
    assert eng.rel_err is not None and eng.rel_err <= cfg.tolerance
    out = eng(eng.make_input(5)).clone()
    assert torch.isfinite(out).all()
    eng.close()


def test_int8_kernels_step_on_a_small_model(tmp_path):
    pytest.importorskip("cudnn", reason="needs nvidia-cudnn-frontend")
    from yolo_sm.topics.precision.collect import Int8KernelSpec, run_int8_kernels

    spec = Int8KernelSpec(widths=(0.25,), batch=2, imgsz=128, warmup_ms=2, budget_ms=5)
    df = run_int8_kernels(spec, tmp_path / "k.parquet", progress=False)
    conv = df[df.scope == "conv"]
    model = df[df.scope == "model"].set_index("kernel")
    print(conv.groupby("kernel").status.value_counts().to_string())
    assert set(conv.kernel) == set(spec.conv_kernels)
    ok = conv[conv.status == "ok"]
    assert (ok.median_ms > 0).all() and (ok.tops > 0).all()
    int8_ok = ok[ok.kernel != "fp16"]
    assert (int8_ok.rel_err < 5e-3).all(), int8_ok[["layer", "kernel", "rel_err"]]
    assert (conv[conv.kernel == "triton"].status == "ok").all()
    assert set(conv[conv.kernel == "intmm"].status) <= {"ok", "skipped", "error"}
    assert list(model.index) == list(spec.model_kernels)
    assert (model.status == "ok").all(), model.message.to_dict()
    assert model.loc["triton", "kernel_convs"] == model.loc["triton", "quant_convs"]

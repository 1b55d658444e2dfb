"""Model builders: output shapes, presets, channel tables (rounding, cap, FLOPs), fusion."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models import (
    build_yolo,
    channel_table,
    model_flops,
    resnet_backbone,
    wide_conv_stack,
)

ROOT = Path(__file__).resolve().parents[1]
ANCHORS_64 = (64 // 8) ** 2 + (64 // 16) ** 2 + (64 // 32) ** 2  # 84


@pytest.fixture(scope="module")
def resnet50():
    return resnet_backbone(50)


@pytest.mark.parametrize("family", ["yolov8", "yolo11"])
@pytest.mark.parametrize("nc", [80, 3])
def test_raw_head_output_shape(family, nc):
    model = build_yolo(family, 0.0625, nc=nc)
    with torch.no_grad():
        out = model(torch.rand(1, 3, 64, 64))
    assert isinstance(out, torch.Tensor)
    assert out.shape == (1, 64 + nc, ANCHORS_64)
    assert torch.isfinite(out).all()
    assert not model.training and all(not p.requires_grad for p in model.parameters())


def test_decode_output_shape():
    model = build_yolo("yolov8", 0.0625, decode=True)
    with torch.no_grad():
        out = model(torch.rand(2, 3, 64, 64))
    assert out.shape == (2, 4 + 80, ANCHORS_64)


def test_same_seed_same_weights_other_seed_differs():
    x = torch.rand(1, 3, 64, 64)
    a, b, c = (build_yolo("yolov8", 0.0625, seed=s)(x) for s in (0, 0, 1))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_preset_matches_explicit_width_depth_cap():
    s = build_yolo("yolov8", "s")
    explicit = build_yolo("yolov8", 0.5, depth=0.33, max_channels=1024)
    assert s.meta["scale"] == "s" and explicit.meta["scale"] is None
    ts, te = channel_table(s, 64), channel_table(explicit, 64)
    assert ts.out_channels.tolist() == te.out_channels.tolist()
    assert ts.params.tolist() == te.params.tolist()  # same depth: same number of blocks


@pytest.mark.parametrize("width", [0.25, 0.5])
def test_flops_match_ultralytics_thop(width):
    from ultralytics.utils.torch_utils import get_flops

    model = build_yolo("yolov8", width)
    ours = channel_table(model, 640).flops.sum()
    thop_gflops = get_flops(model.det, 640)
    assert thop_gflops > 0, "ultralytics' get_flops returned 0 (thop missing?)"
    assert abs(ours / 1e9 - thop_gflops) / thop_gflops < 0.005
    assert model_flops(model, 640) == ours


def test_flops_scale_with_image_area():
    model = build_yolo("yolov8", 0.125)
    assert model_flops(model, 128) == pytest.approx(4 * model_flops(model, 64), rel=0.01)


@pytest.mark.parametrize("width, any_rounded", [(0.25, False), (0.3, True)])
def test_rounding_flag(width, any_rounded):
    t = channel_table(build_yolo("yolov8", width), 64)
    req = t[t.requested_channels.notna()]
    assert len(req) > 10
    assert (req.out_channels % 8 == 0).all()
    assert (req.out_channels >= req.requested_channels).all()
    assert (req.out_channels - req.requested_channels < 8).all()
    assert (req.rounded == (req.out_channels != req.requested_channels)).all()
    assert req.rounded.any() == any_rounded
    assert not t[t.requested_channels.isna()].rounded.any()


def test_max_channels_cap():
    model = build_yolo("yolov8", 1.0, max_channels=256)
    t = channel_table(model, 64)
    req = t[t.requested_channels.notna()]  # width 1.0: requested == the YAML channels
    assert (req.capped == (req.requested_channels > 256)).all()
    assert req.capped.any() and (~req.capped).any()
    assert (req[req.capped].out_channels == 256).all()
    assert (req[~req.capped].out_channels == req[~req.capped].requested_channels).all()
    assert not t[t.requested_channels.isna()].capped.any()
    assert not channel_table(build_yolo("yolov8", 0.25), 64).capped.any()  # 1024 < 2048
    assert not req.rounded.any()  # capped to 256 at width 1.0: a multiple of 8, no rounding


def test_cap_applies_before_the_width_and_rounding_after_it():
    # ultralytics: make_divisible(min(yaml, max_channels) * width, 8)
    t = channel_table(build_yolo("yolov8", 1.25, max_channels=512, calibrate=False), 64)
    capped = t[t.capped]
    assert len(capped) and (capped.out_channels == 640).all()  # min(1024, 512) x 1.25
    assert not capped.rounded.any()  # 640 needs no rounding: only the cap changed it
    t = channel_table(build_yolo("yolov8", 0.3, max_channels=512, calibrate=False), 64)
    assert t[t.capped].rounded.all()  # min(1024, 512) x 0.3 = 153.6 -> 160: both at once


@pytest.mark.parametrize("family", ["yolov8", "yolo11"])
def test_stage_column(family):
    t = channel_table(build_yolo(family, 0.0625), 64)
    order = {"backbone": 0, "neck": 1, "head": 2}
    assert set(t.stage) == set(order)
    assert t.stage.map(order).is_monotonic_increasing
    assert t.stage.iloc[-1] == "head" and (t.stage == "head").sum() == 1
    assert t.stage.iloc[0] == "backbone"
    assert t.out_channels.iloc[-1] == 64 + 80
    assert t["index"].tolist() == list(range(len(t)))
    assert t.layer.tolist() == [f"model.{i}" for i in range(len(t))]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"width": 0},
        {"width": -1},
        {"width": 5},
        {"width": math.nan},
        {"width": "nan"},
        {"width": 0.03},
        {"width": "z"},
        {"width": "S"},
        {"family": "yolov5", "width": 0.25},
        {"family": "yolov5", "width": "s"},
        {"width": 0.25, "depth": 0},
        {"width": 0.25, "depth": 5},
        {"width": 0.25, "max_channels": 0},
        {"width": 0.25, "nc": 0},
    ],
)
def test_invalid_arguments_raise_user_error(kwargs):
    kwargs.setdefault("family", "yolov8")
    with pytest.raises(UserError):
        build_yolo(**kwargs)


# --- wide conv stack ----------------------------------------------------------------------


@pytest.mark.parametrize("factor", [1.25, 1.1, 0.5])
def test_wide_conv_stack_channels_and_strides(factor):
    stack = wide_conv_stack(factor)
    bases = (64, 128, 256, 512)
    convs = [b.conv for b in stack.blocks]
    assert [c.out_channels for c in convs] == [int(b * factor) for b in bases for _ in range(2)]
    assert [c.stride for c in convs] == [(2, 2), (1, 1)] * 4
    with torch.no_grad():
        out = stack(torch.rand(1, 3, 64, 64))
    assert out.shape == (1, int(512 * factor), 4, 4)
    t = channel_table(stack, 64)
    assert t.stage.tolist() == [f"stage{s}" for s in range(4) for _ in range(2)]
    assert t.stride.tolist() == [2, 2, 4, 4, 8, 8, 16, 16]


def test_wide_conv_stack_article_channels():
    t = channel_table(wide_conv_stack(1.25), 64)
    assert t.out_channels.tolist() == [80, 80, 160, 160, 320, 320, 640, 640]


@pytest.mark.parametrize("factor", [0, -1, 5, math.nan])
def test_wide_conv_stack_invalid(factor):
    with pytest.raises(UserError):
        wide_conv_stack(factor)


# --- ResNet -------------------------------------------------------------------------------


@pytest.mark.parametrize("nc, anchors", [(1, 2), (3, 3)])
def test_resnet_output_shape(nc, anchors):
    model = resnet_backbone(18, nc=nc, anchors=anchors)
    with torch.no_grad():
        out = model(torch.rand(2, 3, 64, 64))
    assert out.shape == (2, 4 + nc, anchors * 2 * 2)  # stride 32: 2x2 cells


def test_resnet50_channel_table(resnet50):
    with torch.no_grad():
        assert resnet50(torch.rand(2, 3, 64, 64)).shape == (2, 5, 8)
    t = channel_table(resnet50, 64)
    assert t.layer.tolist() == ["stem", "layer1", "layer2", "layer3", "layer4", "head"]
    assert t.stage.tolist() == ["backbone"] * 5 + ["head"]
    assert t.out_channels.tolist() == [64, 256, 512, 1024, 2048, 2 * (4 + 1)]
    assert t.stride.tolist() == [4, 4, 8, 16, 32, 32]


def test_resnet_invalid_depth():
    with pytest.raises(UserError):
        resnet_backbone(42)


# --- Conv+BN fusion -----------------------------------------------------------------------


def _batchnorms(model):
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


@pytest.mark.parametrize(
    "build",
    [
        lambda fuse: build_yolo("yolov8", 0.0625, fuse=fuse),
        lambda fuse: build_yolo("yolo11", 0.0625, fuse=fuse),
        lambda fuse: resnet_backbone(18, fuse=fuse),
        lambda fuse: wide_conv_stack(0.25, fuse=fuse),
    ],
    ids=["yolov8", "yolo11", "resnet18", "wide"],
)
def test_batchnorm_fused_and_output_unchanged(build):
    fused, plain = build(True), build(False)
    assert _batchnorms(fused) == []
    assert len(_batchnorms(plain)) > 0  # the check above can see a BatchNorm
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        a, b = fused(x), plain.eval()(x)
    assert a.shape == b.shape
    assert torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b) < 1e-4


def test_resnet50_has_no_batchnorm(resnet50):
    assert _batchnorms(resnet50) == []


# --- import side effects ------------------------------------------------------------------


def test_import_is_light_and_offline():
    env = {k: v for k, v in os.environ.items() if not k.startswith("YOLO_")}
    env["PYTHONPATH"] = str(ROOT)
    code = (
        "import os, sys, json; import yolo_sm; "
        "print(json.dumps({'mods': [m for m in ('ultralytics', 'tensorrt', 'onnxruntime', "
        "'pynvml') if m in sys.modules], 'offline': os.environ.get('YOLO_OFFLINE')}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    import json

    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"mods": [], "offline": "1"}


def _layer_stds(model, x):
    import torch

    from yolo_sm.core.models import layers

    stds = {}

    def hook(name):
        def h(mod, inp, out):
            t = out if torch.is_tensor(out) else torch.cat([out["boxes"], out["scores"]], 1)
            stds[name] = float(t.float().std())

        return h

    handles = [r.module.register_forward_hook(hook(r.name)) for r in layers(model)]
    with torch.no_grad():
        out = model(x)
    for h in handles:
        h.remove()
    return stds, out


def test_calibrated_models_keep_activations_alive_and_input_dependent():
    import torch

    from yolo_sm.core.models import build_yolo

    x1, x2 = torch.rand(2, 3, 96, 96), torch.rand(2, 3, 96, 96)
    cal = build_yolo("yolov8", 0.25)
    stds, out1 = _layer_stds(cal, x1)
    assert min(stds[f"model.{i}"] for i in range(22)) > 0.1
    _, out2 = _layer_stds(cal, x2)
    assert float((out1 - out2).norm() / out1.norm()) > 0.01
    # ultralytics' default init with identity BN statistics: activations vanish with depth
    raw = build_yolo("yolov8", 0.25, calibrate=False)
    stds_raw, _ = _layer_stds(raw, x1)
    assert stds_raw["model.9"] < 1e-5


def test_wide_stack_and_resnet_are_calibrated_and_frozen():
    import torch

    from yolo_sm.core.models import resnet_backbone, wide_conv_stack

    for m in (wide_conv_stack(1.0), resnet_backbone(18)):
        assert not any(p.requires_grad for p in m.parameters())
        with torch.no_grad():
            y = m(torch.rand(2, 3, 64, 64))
        assert 0.05 < float(y.std()) < 100

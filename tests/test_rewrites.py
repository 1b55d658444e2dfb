"""The exact model rewrites made before torch.compile (collect.models.rewrites) and the compile
modes that name them (``default+sep-pool``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import check_params
from yolo_sm.contract.values import compile_mode, split_compile_mode
from yolo_sm.core.bench import BenchSpec, parse_engine
from yolo_sm.core.engines import EngineConfig
from yolo_sm.core.models.rewrites import (
    SeparableMaxPool2d,
    apply_rewrites,
    separable,
    separable_pools,
)
from yolo_sm.topics.deploy import CacheStep


@pytest.mark.parametrize("k", [3, 5, 7])
@pytest.mark.parametrize("hw", [(20, 20), (3, 11), (1, 2), (9, 4)])
def test_the_separable_pool_equals_the_square_pool_bit_for_bit(k, hw):
    g = torch.Generator().manual_seed(k * 100 + hw[0])
    x = torch.randn(2, 6, *hw, generator=g)
    x[0, 0, 0, 0] = float("nan")
    x[1, 2, -1, -1] = float("-inf")
    x[1, 3] = 0.0  # ties
    x = x.contiguous(memory_format=torch.channels_last)
    want = nn.MaxPool2d(k, 1, k // 2)(x)
    got = SeparableMaxPool2d(k)(x)
    assert got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))
    half = x.half()
    assert torch.equal(
        SeparableMaxPool2d(k)(half).nan_to_num(0.0),
        nn.MaxPool2d(k, 1, k // 2)(half).nan_to_num(0.0),
    )


@pytest.mark.parametrize(
    "pool, ok",
    [
        (nn.MaxPool2d(5, 1, 2), True),
        (nn.MaxPool2d((3, 3), (1, 1), (1, 1)), True),
        (nn.MaxPool2d(5, 2, 2), False),  # strided
        (nn.MaxPool2d(5), False),  # stride defaults to the kernel
        (nn.MaxPool2d(4, 1, 2), False),  # even kernel
        (nn.MaxPool2d(5, 1, 0), False),  # no padding: the output shrinks
        (nn.MaxPool2d(5, 1, 2, dilation=2), False),
        (nn.MaxPool2d(5, 1, 2, ceil_mode=True), False),
        (nn.MaxPool2d(5, 1, 2, return_indices=True), False),
        (nn.MaxPool2d((3, 5), 1, (1, 2)), False),  # not square
        (nn.AvgPool2d(5, 1, 2), False),
    ],
)
def test_only_stride_one_same_padding_square_max_pools_are_rewritten(pool, ok):
    assert separable(pool) is ok
    holder = nn.Sequential(pool)
    assert separable_pools(holder) == int(ok)
    assert isinstance(holder[0], SeparableMaxPool2d) is ok


def test_a_yolov8s_sppf_pool_is_rewritten_and_its_output_is_unchanged(tiny_yolo):
    import copy

    x = torch.randn(1, 3, 64, 64)
    rewritten = copy.deepcopy(tiny_yolo)
    assert apply_rewrites(rewritten, ("sep-pool",)) == {"sep-pool": 1}  # SPPF's one pool
    assert any(isinstance(m, SeparableMaxPool2d) for m in rewritten.modules())
    assert not any(type(m) is nn.MaxPool2d for m in rewritten.modules())
    with torch.no_grad():
        assert torch.equal(rewritten(x), tiny_yolo(x))
    assert apply_rewrites(rewritten, ("sep-pool",)) == {"sep-pool": 0}  # nothing left


@pytest.mark.parametrize(
    "text, want",
    [
        ("default", ("default", ())),
        ("default+sep-pool", ("default", ("sep-pool",))),
        ("Reduce-Overhead+SEP-POOL", ("reduce-overhead", ("sep-pool",))),
        ("max-autotune-no-cudagraphs+sep-pool", ("max-autotune-no-cudagraphs", ("sep-pool",))),
    ],
)
def test_a_compile_mode_may_name_rewrites_after_a_plus(text, want):
    assert split_compile_mode(compile_mode(text, "mode")) == want


@pytest.mark.parametrize(
    "text", ["fastest", "+sep-pool", "default+", "default+fold", "default+sep-pool+sep-pool"]
)
def test_an_unknown_mode_or_rewrite_is_one_sentence(text):
    with pytest.raises(UserError, match="compile mode|rewrite"):
        compile_mode(text, "mode")
    with pytest.raises(UserError):
        EngineConfig(backend="compile", compile_mode=text, device="cpu")


def test_bench_plans_and_cache_builds_take_a_mode_with_a_rewrite():
    assert parse_engine("compile:default+sep-pool/fp16/nhwc") == (
        "compile:default+sep-pool",
        "fp16",
        "nhwc",
    )
    spec = BenchSpec.from_mapping({"engines": ["compile:reduce-overhead+sep-pool/int8/nhwc"]})
    assert spec.engines[0][0] == "compile:reduce-overhead+sep-pool"
    with pytest.raises(UserError):
        parse_engine("eager:default+sep-pool/fp16/nhwc")  # a mode is the compile backend's
    check_params("sweep", {"compile_mode": "default+sep-pool"}, "step")
    check_params("compile_cache", {"modes": ["default", "default+sep-pool"]}, "step")
    with pytest.raises(UserError, match="rewrite"):
        check_params("compile_cache", {"modes": ["default+fold"]}, "step")
    assert CacheStep.from_mapping({"modes": ["default+sep-pool"]}).modes == ("default+sep-pool",)
    with pytest.raises(UserError, match="rewrite"):
        CacheStep.from_mapping({"modes": ["default+fold"]})


def test_the_compiled_module_of_a_rewriting_mode_is_rewritten_and_compiled_in_torchs_mode(
    tiny_yolo, monkeypatch
):
    """torch.compile gets the torch mode and a rewritten copy; the plain mode's module is
    another one, left as it was. Dynamo is not run here (see test_engines)."""
    from dataclasses import replace

    from yolo_sm.core.engines import torch_backends

    modes = []

    class Compiled:
        def __init__(self, module, mode):
            self._orig_mod = module
            modes.append(mode)

    monkeypatch.setattr(torch, "compile", lambda module, mode, **kw: Compiled(module, mode))
    monkeypatch.setattr(torch_backends, "_COMPILED", type(torch_backends._COMPILED)())
    cfg = EngineConfig(backend="compile", precision="fp32", device="cpu", batch=1, imgsz=64)
    plain = torch_backends._compiled_module(tiny_yolo, cfg)
    sep = torch_backends._compiled_module(
        tiny_yolo, replace(cfg, compile_mode="reduce-overhead+sep-pool")
    )
    assert modes == ["default", "reduce-overhead"]
    assert plain._orig_mod.rewrites == {} and sep._orig_mod.rewrites == {"sep-pool": 1}
    assert any(isinstance(m, SeparableMaxPool2d) for m in sep._orig_mod.modules())
    assert not any(isinstance(m, SeparableMaxPool2d) for m in plain._orig_mod.modules())
    assert not any(isinstance(m, SeparableMaxPool2d) for m in tiny_yolo.modules())


def test_a_rewriting_engines_caveat_is_its_modes_and_names_the_rewrite():
    from yolo_sm.topics.deploy.recommend import caveat

    plain = caveat("compile:reduce-overhead/fp16/nhwc")
    sep = caveat("compile:reduce-overhead+sep-pool/int8/nhwc")
    assert "static shapes" in plain and sep.startswith(plain)
    assert "sep-pool" in sep and "8-bit" in sep
    assert "sep-pool" not in plain


def test_an_engine_config_keeps_its_mode_lower_cased():
    cfg = EngineConfig(backend="compile", compile_mode="Reduce-Overhead+SEP-Pool", device="cpu")
    assert cfg.compile_mode == "reduce-overhead+sep-pool"
    assert split_compile_mode(cfg.compile_mode) == ("reduce-overhead", ("sep-pool",))

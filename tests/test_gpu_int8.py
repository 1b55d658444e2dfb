"""The int8 engine without TensorRT on a GPU (marker ``gpu``): the Triton quantiser against
torch's, one cuDNN int8 convolution against the emulation, and the cudnn int8 CUDA-graph engine
of YOLOv8 width 0.5 at batch 8 (its check, its fallbacks, a run)."""

import copy

import pytest
import torch

from tests.fixtures.conv_blocks import fused_conv_blocks

pytestmark = pytest.mark.gpu


def test_triton_int8_quantisation_equals_torch_bit_for_bit():
    from yolo_sm.core.engines import int8

    x = torch.randn(4, 64, 40, 40, device="cuda", dtype=torch.float16) * 50
    x = x.contiguous(memory_format=torch.channels_last)
    q = int8.quantize_int8(x, 0.07)
    ref = int8.quantize_values(x, 0.07).to(torch.int8)
    assert q.dtype == torch.int8 and q.stride() == x.stride()
    assert torch.equal(q, ref)


@pytest.mark.parametrize("k,stride", [(1, 1), (3, 1), (3, 2)])
def test_cudnn_int8_conv_matches_the_emulation(k, stride, monkeypatch):
    from torch import nn

    from yolo_sm.core.engines import int8

    pytest.importorskip("cudnn", reason="needs nvidia-cudnn-frontend")
    conv = nn.Conv2d(64, 128, k, stride, k // 2).cuda().half()
    with torch.no_grad():  # per-channel scales over three decades, a bias that matters
        conv.weight.mul_(torch.logspace(-2, 1, 128, device="cuda").view(-1, 1, 1, 1).half())
        conv.bias.copy_(torch.linspace(-5, 5, 128, device="cuda").half())
    x = torch.nn.functional.silu(torch.randn(8, 64, 40, 40, device="cuda", dtype=torch.half))
    x = x.contiguous(memory_format=torch.channels_last)
    scale = float(x.abs().max()) / 127
    int8._TUNED.clear()  # tune this shape here, not reuse an earlier test's choice
    monkeypatch.setenv("YOLO_SM_PLAN_CACHE", "off")  # nor an earlier process's
    real = int8.Int8Conv(conv, scale, "cudnn", silu=True).cuda()
    emu = int8.Int8Conv(conv, scale, "emulate", silu=True).cuda()
    y, ref = real(x), emu(x)
    assert real.fallback is None, real.fallback
    assert y.shape == ref.shape and y.dtype == torch.float16
    (plan,) = real._plans.values()
    print(f"int8 conv k{k} s{stride}: {real.graph_modes}, declined {real.declined}")
    if int8.AUTOTUNE_PLANS:
        assert plan.tuning and all(ms > 0 for _, ms in plan.tuning)
    assert float((y.float() - ref.float()).norm() / ref.float().norm()) < 5e-3


def test_cudnn_int8_handoff_writes_the_next_convs_input_in_int8():
    """Two conv blocks, the first handing over: its cuDNN graph writes int8 at the second's
    input scale (within one step of the emulation's rounding), and the pair's output matches
    the emulated pair's."""
    from yolo_sm.core.engines import int8

    pytest.importorskip("cudnn", reason="needs nvidia-cudnn-frontend")
    blocks = _fused_blocks((64, 128, 3, 2), (128, 128, 1))
    x = torch.randn(8, 64, 80, 80, device="cuda", dtype=torch.half)
    x = x.contiguous(memory_format=torch.channels_last)
    real, emu = copy.deepcopy(blocks), copy.deepcopy(blocks)
    assert int8.quantize_convs(real, [x], kernel="cudnn")["int8_handoffs"] == 1
    assert int8.quantize_convs(emu, [x], kernel="emulate", handoff=False)["int8_handoffs"] == 0
    emu[0].conv.silu, emu[0].act = True, torch.nn.Identity()  # as cudnn: SiLU in the conv
    emu[0].conv.output_scale = real[0].conv.output_scale
    int8._TUNED.clear()
    with torch.no_grad():
        mid, ref_mid = real[0](x), emu[0](x)
        y, ref = real(x), emu(x)
    modes, declined = set(real[0].conv.graph_modes.values()), real[0].conv.declined
    print(f"int8 hand-off: {modes}, declined {declined}")
    assert real[0].conv.fallback is None, real[0].conv.fallback
    assert mid.dtype == ref_mid.dtype == torch.int8
    steps = (mid.float() - ref_mid.float()).abs()
    assert steps.max() <= 1 and (steps == 0).float().mean() > 0.99
    assert float((y.float() - ref.float()).norm() / ref.float().norm()) < 5e-3
    if modes != {"fused_int8"}:  # the values above came from the fallback graph
        pytest.skip(f"cuDNN declined the INT8 output here ({declined}); its fallback was checked")


def _fused_blocks(*shapes):
    """:func:`fused_conv_blocks`, fp16 NHWC on the GPU."""
    torch.manual_seed(0)
    blocks = fused_conv_blocks(*shapes)
    return blocks.cuda().half().to(memory_format=torch.channels_last)


def test_int8_cudagraph_engine_w05_b8_builds_checks_and_runs():
    pytest.importorskip("cudnn", reason="needs nvidia-cudnn-frontend")
    from yolo_sm.core.engines import EngineConfig, build_engine, int8
    from yolo_sm.core.models import build_yolo

    model = build_yolo("yolov8", 0.5)
    cfg = EngineConfig(
        backend="cudagraph", precision="int8", layout="nhwc", batch=8, imgsz=640, device="cuda"
    )
    eng = build_engine(model, cfg)
    counts = int8.graph_counts(eng.module)
    falls = int8.fallbacks(eng.module)
    print(
        f"int8 cudagraph w0.5 b8: rel_err {eng.rel_err:.4g} (tolerance {cfg.tolerance:g}), "
        f"graphs {counts}, fallbacks {len(falls)}: {sorted(set(falls.values()))[:3]}"
    )
    assert eng.module.int8_info["int8_kernel"] == "cudnn"
    ran = counts["fused_int8"] + counts["fused"] + counts["unfused"]
    assert counts["int8_convs"] == ran + counts["fp16"]
    assert ran > 0  # cuDNN ran int8 convolutions
    assert eng.module.int8_info["int8_handoffs"] > 0
    assert eng.rel_err is not None and eng.rel_err <= cfg.tolerance
    out = eng(eng.make_input(5)).clone()
    again = eng(eng.make_input(5))
    assert torch.isfinite(out).all() and torch.allclose(out.float(), again.float(), atol=1e-3)
    eng.close()


def test_int8_compiled_engine_runs_cudnn_graphs_as_one_op_and_matches_the_graph_engine():
    """torch.compile of the int8 model (default mode, and reduce-overhead): its convolutions
    are the custom op yolo_sm::int8_conv on cuDNN's graphs, its quantisation fused by inductor;
    it passes its check, and its output is the CUDA-graph int8 engine's within fp16 rounding of
    the parts inductor fuses."""
    pytest.importorskip("cudnn", reason="needs nvidia-cudnn-frontend")
    from yolo_sm.core.engines import EngineConfig, build_engine, int8
    from yolo_sm.core.models import build_yolo

    model = build_yolo("yolov8", 0.5)
    cfg = dict(precision="int8", layout="nhwc", batch=8, imgsz=320, device="cuda")
    graph = build_engine(model, EngineConfig(backend="cudagraph", **cfg))
    x = graph.make_input(3)
    want = graph(x).clone()
    graph.close()
    for mode in ("default", "reduce-overhead"):
        eng = build_engine(model, EngineConfig(backend="compile", compile_mode=mode, **cfg))
        counts = int8.graph_counts(eng.module)
        print(f"int8 compile[{mode}] w0.5 b8: rel_err {eng.rel_err:.4g}, graphs {counts}")
        assert counts["fused_int8"] + counts["fused"] + counts["unfused"] > 0
        assert eng.rel_err is not None and eng.rel_err <= eng.config.tolerance
        out = eng(x).clone()
        err = float((out.float() - want.float()).norm() / want.float().norm())
        assert err < 2e-2, err
        assert eng.info["recompiles"] == 0
        eng.close()
    # a second batch size on the same compiled module: its cuDNN graphs are built before the
    # compiled call, not inside reduce-overhead's CUDA-graph recording (whose pool refuses them)
    cfg["batch"] = 4
    eng = build_engine(
        model, EngineConfig(backend="compile", compile_mode="reduce-overhead", **cfg)
    )
    assert eng.rel_err is not None and eng.rel_err <= eng.config.tolerance
    eng.close()


def test_a_second_process_takes_the_tuned_plans_from_the_disk_cache(tmp_path, monkeypatch):
    """The first build tunes each cuDNN graph and stores its choice; a later build that has not
    tuned in this process (its in-process choices cleared) takes every plan from the disk
    cache, tunes nothing, and gives the same output."""
    pytest.importorskip("cudnn", reason="needs nvidia-cudnn-frontend")
    from yolo_sm.core.engines import EngineConfig, build_engine, int8, plan_cache
    from yolo_sm.core.engines.qconv import plan_sources
    from yolo_sm.core.models import build_yolo
    from yolo_sm.core.sweep import quant_columns

    if not int8.AUTOTUNE_PLANS:
        pytest.skip("plan tuning is off (YOLO_SM_INT8_PLANS=0)")
    monkeypatch.setenv("YOLO_SM_CACHE", str(tmp_path))
    monkeypatch.delenv("YOLO_SM_PLAN_CACHE", raising=False)
    monkeypatch.setattr(plan_cache, "_OPEN", {})
    model = build_yolo("yolov8", 0.25)
    cfg = EngineConfig(backend="cudagraph", precision="int8", batch=2, imgsz=320, device="cuda")
    outs, sources = [], []
    for _ in range(2):
        int8._TUNED.clear()
        monkeypatch.setattr(plan_cache, "_OPEN", {})  # as a new process opens it
        eng = build_engine(model, cfg)
        outs.append(eng(eng.make_input(3)).clone())
        sources.append(plan_sources(eng.module))
        cached = quant_columns(eng)["quant_plans_cached"]
        eng.close()
    first, second = sources
    print(f"int8 plan sources: first build {first}, second build {second}")
    assert first.get("tuned", 0) > 0 and first.get("disk", 0) == 0
    assert second.get("disk", 0) == first["tuned"] and second.get("tuned", 0) == 0
    assert cached == second["disk"]
    assert list((tmp_path / "cudnn_plans").glob("plans-*.json"))
    assert torch.equal(outs[0], outs[1])

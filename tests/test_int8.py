"""The int8 path without TensorRT: quantisation math, calibration, the CPU emulation engine,
config checks, the numerics table's int8 rows and the side-by-side rules."""

import copy
import math

import pandas as pd
import pytest
import torch

from tests.fixtures.conv_blocks import fused_conv_blocks
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.vocab import TOLERANCE, Precision
from yolo_sm.core.engines import EngineConfig, build_engine, int8, qconv
from yolo_sm.core.models import build_yolo
from yolo_sm.core.models.common import calibration_batches
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY, topic_rules
from yolo_sm.topics.precision import eight_bit as p8


def test_values_round_half_away_and_saturate_at_127():
    x = torch.tensor([0.0, 0.49, 0.5, 1.5, 2.5, -0.5, -2.5, 126.6, 300.0, -300.0])
    q = int8.quantize_values(x, 1.0)
    assert q.tolist() == [0, 0, 1, 2, 3, -1, -3, 127, 127, -127]
    assert int8.quantize_values(x, 2.0).tolist()[-2:] == [127, -127]  # 300/2 saturates too
    assert int8.quantize_values(torch.tensor([3.0]), 2.0).item() == 2  # 1.5 -> 2
    q8 = int8.quantize_int8(x, 1.0)  # the torch path off the GPU: same values, int8
    assert q8.dtype == torch.int8 and torch.equal(q8.float(), q)


def test_weight_scales_are_per_output_channel_amax_over_127():
    w = torch.zeros(3, 2, 3, 3)
    w[0, 0, 1, 1], w[1, 1, 0, 0], w[2, 0, 2, 2] = 127.0, -1.27, 0.0
    assert torch.allclose(int8.weight_scales(w), torch.tensor([1.0, 0.01, 1e-12 / 127]))
    conv = torch.nn.Conv2d(2, 3, 3)
    with torch.no_grad():
        conv.weight.copy_(
            torch.randn(3, 2, 3, 3) * torch.tensor([1.0, 10.0, 0.01]).view(3, 1, 1, 1)
        )
    m = int8.Int8Conv(conv, 0.1)
    assert m.weight_int8.dtype == torch.int8
    assert m.weight_int8.abs().amax(dim=(1, 2, 3)).tolist() == [127, 127, 127]
    # the de-quantised weight is within half a step of the original, per channel
    step = m.weight_scale.view(3, 1, 1, 1)
    assert ((m.weight - conv.weight).abs() <= step / 2 + 1e-7).all()


def test_percentile_calibration_clips_the_tail():
    x = torch.arange(1, 10001, dtype=torch.float32)
    assert int8.percentile_abs(x, 99.99) == 9999.0
    assert int8.percentile_abs(-x, 99.0) == 9900.0  # |x|
    assert int8.percentile_abs(x, 100.0) == 10000.0
    assert int8.calibration_stat("max")(-x) == 10000.0
    assert int8.calibration_stat("percentile", 50.0)(x) == 5000.0
    with pytest.raises(UserError, match="unknown int8 calibration 'entropy'"):
        EngineConfig(precision="int8", int8_calibration="entropy")


def test_emulated_conv_is_integer_arithmetic_then_descale():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 4, 3, padding=1)
    x = torch.randn(2, 8, 6, 6)
    m = int8.Int8Conv(conv, float(x.abs().max()) / 127)
    xq = int8.quantize_values(x, m.input_scale).double()
    acc = torch.nn.functional.conv2d(xq, m.weight_int8.double(), padding=1)  # exact integers
    assert torch.equal(acc, acc.round())
    ref = acc * (m.input_scale.double() * m.weight_scale.double()).view(1, -1, 1, 1)
    ref = ref + conv.bias.double().view(1, -1, 1, 1)
    with torch.no_grad():
        y = m(x)
    assert torch.allclose(y.double(), ref, atol=1e-5)
    # and close to the float conv: int8 steps are small at this range
    with torch.no_grad():
        err = float((y - conv(x)).norm() / conv(x).norm())
    assert 1e-4 < err < 0.05


def test_channels_not_multiple_of_4_fall_back_with_a_reason():
    m = int8.Int8Conv(torch.nn.Conv2d(6, 8, 1), 0.1, kernel="cudnn")
    assert m._build(torch.zeros(1, 6, 4, 4)) is None
    assert "multiples of 4" in m.fallback
    assert qconv.fallbacks(torch.nn.Sequential(m)) == {"0": m.fallback}
    assert int8.graph_counts(torch.nn.Sequential(m))["fp16"] == 1


@pytest.fixture(scope="module")
def tiny():
    return build_yolo("yolov8", 0.25).eval()


@pytest.mark.parametrize("calibration", ["max", "percentile"])
def test_int8_engine_runs_on_cpu_as_emulation_and_passes_its_check(tiny, calibration):
    cfg = EngineConfig(
        precision="int8",
        layout="nhwc",
        batch=1,
        imgsz=64,
        device="cpu",
        int8_calibration=calibration,
    )
    eng = build_engine(tiny, cfg)
    info = eng.module.int8_info
    assert info["int8_kernel"] == "emulate" and info["int8_calibration"] == calibration
    assert info["int8_convs"] == len(qconv.eligible_convs(tiny))
    assert 0 < eng.rel_err <= TOLERANCE[Precision.INT8]
    assert eng.config.tolerance == TOLERANCE[Precision.INT8]
    out = eng(eng.make_input(3))
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    eng.close()


def test_sweep_and_bench_rows_count_the_handoffs(tiny):
    from yolo_sm.contract.schema import SCHEMAS
    from yolo_sm.core import bench
    from yolo_sm.core.sweep import quant_columns

    cfg = EngineConfig(precision="int8", layout="nhwc", batch=1, imgsz=64, device="cpu")
    eng = build_engine(tiny, cfg)
    cols = quant_columns(eng)
    assert cols["quant_handoffs"] == eng.module.int8_info["int8_handoffs"]
    assert "quant_handoffs" in bench._POINT_COLUMNS
    assert {"quant_handoffs"} <= set(SCHEMAS["bench"]) & set(SCHEMAS["sweep"])
    eng.close()


def test_percentile_scales_sit_below_max_scales(tiny):
    x = calibration_batches(64)[:1]
    a, b = copy.deepcopy(tiny), copy.deepcopy(tiny)
    int8.quantize_convs(a, x, calibration="max")
    int8.quantize_convs(b, x, calibration="percentile", percentile=99.0)
    sa = [float(m.input_scale) for m in a.modules() if isinstance(m, int8.Int8Conv)]
    sb = [float(m.input_scale) for m in b.modules() if isinstance(m, int8.Int8Conv)]
    assert len(sa) == len(sb) > 10
    assert all(q <= p for p, q in zip(sa, sb, strict=True)) and sum(sb) < 0.9 * sum(sa)


def test_cudnn_kernel_fuses_silu_and_equals_emulation_off_the_gpu(tiny):
    x = calibration_batches(64)[0]
    q, e = copy.deepcopy(tiny), copy.deepcopy(tiny)
    int8.quantize_convs(q, [x], kernel="cudnn")
    int8.quantize_convs(e, [x], kernel="emulate")
    f = [m for m in q.modules() if isinstance(m, int8.Int8Conv)]
    assert f and all(m.silu for m in f)
    parents = [p for p in q.modules() if isinstance(getattr(p, "conv", None), int8.Int8Conv)]
    assert all(isinstance(p.act, torch.nn.Identity) for p in parents)
    with torch.no_grad():
        assert torch.allclose(q(x), e(x), atol=1e-4)


def test_the_compiled_int8_conv_traces_as_one_op_with_the_eager_values():
    """Under torch.compile an int8 convolution is its quantisation in torch ops and the custom
    op yolo_sm::int8_conv (traced from its fake: shape, dtype, channels-last), whose body on a
    CPU is the emulation: the same values as the eager module. A copy is an op of its own."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 12, 3, stride=2, padding=1)
    m = int8.Int8Conv(conv, input_scale=0.02, kernel="cudnn", silu=True)
    x = torch.randn(2, 8, 9, 11).to(memory_format=torch.channels_last)
    traced = torch.compile(m._compiled, backend="aot_eager", fullgraph=True)
    with torch.no_grad():
        y, want = traced(x), m._emulate(x)
    assert y.shape == (2, 12, 5, 6) and y.dtype == x.dtype
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(y, want)
    twin = copy.deepcopy(m)
    assert twin.number != m.number and int8._CONVS[twin.number] is twin
    assert int8._CONVS[m.number] is m
    fake = int8._int8_conv_fake(x, 0, 12, [3, 3], [2, 2], [1, 1], [1, 1], x.dtype)
    assert fake.shape == (2, 12, 5, 6)
    with pytest.raises(NotAvailableError, match="torch.compile"):
        int8.Int8Conv(conv, input_scale=0.02, kernel="triton")._compiled(x)


class _Chain(torch.nn.Module):
    """Conv blocks whose outputs go: a -> b only (a hand-off); b -> c and into an add (none);
    d -> e with d's 6 output channels, which cuDNN's int8 graphs do not take (none)."""

    def __init__(self):
        super().__init__()
        blocks = fused_conv_blocks((8, 16, 3), (16, 16, 1), (16, 16, 3), (16, 6, 1), (6, 8, 3))
        self.a, self.b, self.c, self.d, self.e = blocks

    def forward(self, x):
        y = self.b(self.a(x))
        return self.e(self.d(y + self.c(y)))


def _chain(kernel: str, handoff: bool = True):
    torch.manual_seed(0)
    m = _Chain().eval()
    x = torch.randn(2, 8, 12, 12)
    info = int8.quantize_convs(m, [x], kernel=kernel, handoff=handoff)
    return m, x, info


def test_handoff_links_a_conv_whose_output_only_the_next_int8_conv_reads():
    """Only a -> b hands over: b's output also feeds an add, d's channels are not cuDNN's. The
    model's output is the same as without hand-off (the emulation rounds in fp32 either way);
    the handed-over tensor is int8 values at b's input scale. An activation between two
    convolutions (the emulation keeps SiLU outside the conv) is a use: nothing is linked."""
    m, x, info = _chain("cudnn")
    assert info["int8_handoffs"] == 1
    assert m.a.conv.output_scale == float(m.b.conv.input_scale)
    assert [c.output_scale for c in (m.b.conv, m.c.conv, m.d.conv, m.e.conv)] == [None] * 4
    plain, _, off = _chain("cudnn", handoff=False)
    assert off["int8_handoffs"] == 0 and plain.a.conv.output_scale is None
    with torch.no_grad():
        mid = m.a(x)
        assert mid.dtype == torch.int8
        assert torch.equal(mid.float(), int8.quantize_values(plain.a(x), m.b.conv.input_scale))
        assert torch.allclose(m(x), plain(x), atol=1e-5)
    emulated, _, info = _chain("emulate")
    assert info["int8_handoffs"] == 0  # a's SiLU runs after its conv, in torch
    assert all(c.output_scale is None for c in emulated.modules() if isinstance(c, int8.Int8Conv))
    assert "output_scale" in repr(m.a.conv) and "output_scale" not in repr(m.b.conv)


def test_handoff_in_a_yolo_model_keeps_its_output(tiny):
    """YOLOv8's downsampling convs, bottlenecks' first convs, C2f's last convs before a
    downsample or the head, SPPF's first conv and the head's first convs hand over; the
    output is the same."""
    x = calibration_batches(64)[0]
    on, off = copy.deepcopy(tiny), copy.deepcopy(tiny)
    n = int8.quantize_convs(on, [x], kernel="cudnn")["int8_handoffs"]
    assert int8.quantize_convs(off, [x], kernel="cudnn", handoff=False)["int8_handoffs"] == 0
    linked = [k for k, c in on.named_modules() if getattr(c, "output_scale", None) is not None]
    assert len(linked) == n and 10 < n < len(qconv.eligible_convs(tiny))
    assert any(k.endswith("m.0.cv1.conv") for k in linked)  # a bottleneck's first conv
    (sppf,) = [m for m in on.modules() if type(m).__name__ == "SPPF"]
    assert sppf.cv1.conv.output_scale == float(sppf.cv2.conv.input_scale)  # through pools
    with torch.no_grad():
        assert torch.allclose(on(x), off(x), atol=1e-4)


def test_handoff_in_yolo11_and_the_wide_stack_keeps_their_output():
    """yolo11 (C3k2, C2PSA's attention) and the wide conv stack (a chain): links found, the
    output the same as without hand-off."""
    from yolo_sm.core.models import build

    x = calibration_batches(64)[0]
    for model in (build_yolo("yolo11", 0.25).eval(), build("wide", 0.25).eval()):
        on, off = copy.deepcopy(model), copy.deepcopy(model)
        assert int8.quantize_convs(on, [x], kernel="cudnn")["int8_handoffs"] > 0
        int8.quantize_convs(off, [x], kernel="cudnn", handoff=False)
        with torch.no_grad():
            assert torch.allclose(on(x), off(x), atol=1e-4)


class _Pools(torch.nn.Module):
    """SPPF's data flow (a conv, three chained max-pools, one concatenation, a conv), with the
    last pool's output also added to the result when ``leak``."""

    def __init__(self, leak: bool):
        super().__init__()
        self.leak = leak
        self.a, self.b = _Chain().b, _Chain().b  # 16 -> 16 conv blocks, BN fused
        self.b.conv = torch.nn.Conv2d(64, 16, 1)
        self.pool = torch.nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        y = [self.a(x)]
        y.extend(self.pool(y[-1]) for _ in range(3))
        out = self.b(torch.cat(y, 1))
        return out + y[-1] if self.leak else out


@pytest.mark.parametrize("leak", [False, True])
def test_handoff_goes_through_pools_and_a_concatenation_read_nowhere_else(leak, monkeypatch):
    """The first conv hands over through the pools and the concatenation (they commute with
    quantising at the second conv's scale: the output is the same), unless a pooled tensor is
    read elsewhere too, or the device does not pool int8."""
    torch.manual_seed(0)
    m, x = _Pools(leak).eval(), torch.randn(2, 16, 10, 10)
    off = copy.deepcopy(m)
    assert int8.quantize_convs(m, [x], kernel="cudnn")["int8_handoffs"] == (0 if leak else 1)
    int8.quantize_convs(off, [x], kernel="cudnn", handoff=False)
    with torch.no_grad():
        assert torch.allclose(m(x), off(x), atol=1e-5)
    monkeypatch.setattr(int8, "_transparent", lambda device: frozenset({"cat"}))
    assert int8.link_handoffs(m, x) == 0


class _Fork(torch.nn.Module):
    """One conv read by two (YOLO's head branches): both were calibrated on its output, so
    they share an input scale and it hands over to both; unless ``leak`` adds it in too."""

    def __init__(self, leak: bool):
        super().__init__()
        self.leak = leak
        chain = _Chain()
        self.a, self.b, self.c = chain.b, chain.c, _Chain().b

    def forward(self, x):
        y = self.a(x)
        out = self.b(y) + self.c(y)
        return out + y if self.leak else out


class _Returns(torch.nn.Module):
    """A backbone returning the feature it also feeds to the next conv: its caller reads it."""

    def __init__(self):
        super().__init__()
        chain = _Chain()
        self.a, self.b = chain.b, chain.c

    def forward(self, x):
        y = self.a(x)
        return y, self.b(y)


def test_an_output_the_forward_returns_is_not_handed_over():
    torch.manual_seed(0)
    m, x = _Returns().eval(), torch.randn(2, 16, 10, 10)
    assert int8.quantize_convs(m, [x], kernel="cudnn")["int8_handoffs"] == 0
    with torch.no_grad():
        feature, _ = m(x)
    assert feature.dtype == x.dtype


@pytest.mark.parametrize("leak", [False, True])
def test_handoff_to_several_convs_reading_one_tensor(leak):
    torch.manual_seed(0)
    m, x = _Fork(leak).eval(), torch.randn(2, 16, 10, 10)
    off = copy.deepcopy(m)
    assert int8.quantize_convs(m, [x], kernel="cudnn")["int8_handoffs"] == (0 if leak else 1)
    assert float(m.b.conv.input_scale) == float(m.c.conv.input_scale)
    int8.quantize_convs(off, [x], kernel="cudnn", handoff=False)
    with torch.no_grad():
        assert torch.allclose(m(x), off(x), atol=1e-5)
    m.c.conv.input_scale.mul_(2)  # a different scale: no one int8 tensor serves both
    assert int8.link_handoffs(m, x) == 0


def test_compiled_handoff_passes_int8_between_the_custom_ops():
    """Under torch.compile a hand-off is one quantisation (the first conv's input) and two
    custom ops, the first writing int8 (its fake says so); the values are the eager chain's."""
    m, x, _ = _chain("cudnn")
    a, b = m.a.conv, m.b.conv
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x = x.contiguous(memory_format=torch.channels_last)
    traced = torch.compile(lambda t: b._compiled(a._compiled(t)), backend=backend, fullgraph=True)
    with torch.no_grad():
        y, want = traced(x), b._emulate(a._emulate(x))
    assert torch.equal(y, want) and y.dtype == x.dtype
    (gm,) = graphs
    ops = [n for n in gm.graph.nodes if "int8_conv" in str(n.target)]
    clamps = [n for n in gm.graph.nodes if "clamp" in str(n.target)]
    assert len(ops) == 2 and len(clamps) == 1
    assert ops[0].meta["example_value"].dtype == torch.int8


def test_int8_handoff_config_is_a_flag():
    assert EngineConfig(precision="int8").int8_handoff is True
    with pytest.raises(UserError, match="int8_handoff"):
        EngineConfig(precision="int8", int8_handoff="yes")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"backend": "compile", "int8_kernel": "triton"}, "does not run under torch.compile"),
        ({"backend": "onnxruntime"}, "eager, cudagraph, compile and tensorrt"),
        ({"int8_calibration": "entropy"}, "calibration"),
        ({"int8_percentile": 40}, "int8_percentile"),
        ({"int8_percentile": "high"}, "int8_percentile"),
    ],
)
def test_int8_config_says_where_it_cannot_run(kwargs, match):
    with pytest.raises(UserError, match=match):
        EngineConfig(precision="int8", **kwargs)


def test_int8_config_accepts_eager_cudagraph_tensorrt():
    for backend in ("eager", "cudagraph", "tensorrt"):
        assert EngineConfig(precision="int8", backend=backend).precision is Precision.INT8
    cfg = EngineConfig(precision="int8", int8_calibration="percentile", int8_percentile=99)
    assert cfg.int8_percentile == 99.0


def test_choose_kernel_says_what_is_missing(monkeypatch):
    assert int8.choose_kernel("cpu") == "emulate"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NotAvailableError, match="no CUDA device"):
        int8.choose_kernel("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (7, 0))
    with pytest.raises(NotAvailableError, match="compute capability 7.5"):
        int8.choose_kernel("cuda")


def test_sweep_keeps_int8_on_eager_graph_and_compile_and_drops_it_on_onnxruntime():
    from yolo_sm.contract.vocab import unsupported
    from yolo_sm.core.sweep import Point, unsupported_reason

    for backend, ok in (("eager", True), ("cudagraph", True), ("compile", True),
                        ("onnxruntime", False)):  # fmt: skip
        p = Point("yolov8", "", 1.0, 0.33, 2048, "int8", "nhwc", backend, 1, 64, "default", "cuda")
        assert (unsupported_reason(p) is None) is ok
        assert (unsupported("int8", "nhwc", backend) is None) is ok


def test_numerics_table_measures_int8_per_calibration(tiny):
    from yolo_sm.core import numerics

    assert numerics.variants(("fp16", "int8")) == [
        ("fp16", ""),
        ("int8", "max"),
        ("int8", "percentile"),
    ]
    df = numerics.numerics_table(
        widths=(0.25,),
        precisions=("fp16",),
        photo_precisions=("fp16", "int8"),
        box_precisions=("int8",),
        imgsz=64,
        photo_imgsz=64,
        batch=1,
        seeds=(1,),
        class_priors=(True,),
        int8_percentile=99.9,
    )
    photo = df[(df["input"] == "photo") & (df.metric == "rel_err")]
    assert sorted(photo.calibration) == ["", "max", "percentile"]
    i8 = photo[photo.precision == "int8"]
    assert (i8.int8_kernel == "emulate").all() and (i8.quant_fallbacks == 0).all()
    assert i8.int8_percentile.dropna().tolist() == [99.9]
    boxes = df[df.metric == "boxes"]
    assert set(boxes.calibration) == {"max", "percentile"} and set(boxes.reference) == {"fp16"}
    # the section's error table: one row per engine, errors and box agreement side by side
    t = p8.error_table(df).set_index("engine")
    assert set(t.index) == {"fp16", "int8 (max)", "int8 (percentile 99.9)"}
    assert t.loc["int8 (max)", "rel_err"] > 0 and 0 <= t.loc["int8 (max)", "matched"] <= 1
    facts = {f["key"]: f["value"] for f in p8.error_facts(p8.error_table(df))}
    assert facts["int8_error_over_tolerance_max"] == pytest.approx(
        i8.rel_err.max() / TOLERANCE[Precision.INT8]
    )
    assert "int8_percentile_over_max_error" in facts and "int8_box_match_min" in facts


def _bench(int8_img_s, int8_status="ok", fallbacks=0):
    rows = []
    for w in (1.0, 2.0):
        for variant, prec, img in (
            ("eager/fp16/nhwc", "fp16", 100.0 / w),
            ("cudagraph/fp16/nhwc", "fp16", 120.0 / w),
            ("cudagraph/fp8/nhwc", "fp8", 150.0 / w),
            ("cudagraph/int8/nhwc", "int8", int8_img_s / w),
        ):
            bad = prec == "int8" and int8_status != "ok"
            rows.append(
                {
                    "width": w,
                    "batch": 64,
                    "variant": variant,
                    "backend": variant.split("/")[0],
                    "scope": "model_only",
                    "precision": prec,
                    "status": "error" if bad else "ok",
                    "message": "NumericalMismatch: relative L2 error 0.4 vs eager fp32"
                    if bad
                    else "",
                    "img_per_s": math.nan if bad else img,
                    "rel_err": math.nan if bad else 0.05,
                    "quant_convs": 50 if prec in ("int8", "fp8") else math.nan,
                    "quant_fallbacks": fallbacks if prec == "int8" else 0,
                    "prov_device": "cuda:0",
                }
            )
    return pd.DataFrame(rows)


def _verdict(rule_id, facts):
    rule = next(r for r in topic_rules("precision") if r.id == rule_id)
    value = next(f["value"] for f in facts if f["key"] == rule.fact and f["scope"] == rule.scope)
    return rule.decide(value)


def test_eight_bit_rules_flip_with_the_facts():
    fast = p8.speed_facts(p8.engine_speed(_bench(180.0)))
    speed = p8.engine_speed(_bench(180.0)).set_index(["width", "variant"])
    assert speed.loc[(1.0, "cudagraph/int8/nhwc"), "vs_fastest_fp16"] == pytest.approx(1.5)
    assert speed.loc[(1.0, "cudagraph/int8/nhwc"), "fastest_fp16"] == "cudagraph/fp16/nhwc"
    # whether 8-bit is faster is decided once, by claim_10 (INT8) and claim_10_fp8
    from yolo_sm.report.rules import topic_rules
    from yolo_sm.topics.claims import analyse as ac

    CLAIMS_RULES = topic_rules("claims")

    rule = {r.id: r for r in CLAIMS_RULES}

    def claim(rid, img, precision):
        f = ac.eight_bit_fact(_bench(img), precision, "bench_8bit")
        return rule[rid].decide(f["value"])

    assert claim("claim_10", 180.0, "int8") == HOLDS
    assert claim("claim_10_fp8", 180.0, "fp8") == PARTLY  # 1.25x
    assert claim("claim_10", 110.0, "int8") == FAILS
    assert _verdict("precision_int8_engine_passes", fast) == HOLDS
    failed = p8.speed_facts(p8.engine_speed(_bench(180.0, int8_status="error")))
    assert _verdict("precision_int8_engine_passes", failed) == FAILS
    speed = p8.engine_speed(_bench(180.0, int8_status="error")).set_index(["width", "variant"])
    over = speed.rel_err[1.0, "cudagraph/int8/nhwc"] / TOLERANCE[Precision.INT8]
    assert over == pytest.approx(0.4 / TOLERANCE[Precision.INT8])  # read from the message
    assert _verdict("precision_int8_all_convs_int8", fast) == HOLDS
    fell = p8.speed_facts(p8.engine_speed(_bench(180.0, fallbacks=3)))
    assert _verdict("precision_int8_all_convs_int8", fell) == FAILS
    cpu = p8.speed_facts(p8.engine_speed(_bench(180.0, fallbacks=3).assign(prov_device="cpu")))
    assert _verdict("precision_int8_all_convs_int8", cpu) == NOT_TESTED  # emulated: no cuDNN


def test_error_rules_flip():
    rule = next(r for r in topic_rules("precision") if r.id == "precision_int8_boxes_agree")
    assert [rule.decide(v) for v in (95.0, 80.0, 50.0)] == [HOLDS, PARTLY, FAILS]
    rule = next(
        r for r in topic_rules("precision") if r.id == "precision_int8_photos_within_tolerance"
    )
    assert [rule.decide(v) for v in (0.5, 1.5)] == [HOLDS, FAILS]


def test_plan_steps_bench_int8_beside_fp16_and_fp8():
    import inspect

    from yolo_sm.contract import plans as contract_plans
    from yolo_sm.core import numerics, plan_runners

    plan = contract_plans.load_plan("data/plans/full.yaml")
    step = next(s for s in plan.steps if s.name == "bench_8bit")
    spec = plan_runners.bench_spec(step, plan)
    assert [w for _, w in spec.models] == [1.0, 2.0, 1.5, 0.5] and spec.batches == (64, 16)
    fp16 = {"eager/fp16/nhwc", "cudagraph/fp16/nhwc", "compile/fp16/nhwc"}
    assert fp16 | {"cudagraph/fp8/nhwc"} <= set(spec.variants())
    assert "cudagraph/int8/nhwc" in spec.variants() and not spec.predict
    step = next(s for s in plan.steps if s.name == "numerics_8bit")
    assert set(step.params) <= set(inspect.signature(numerics.numerics_table).parameters)
    assert step.params["int8_calibrations"] == ["max", "percentile"]


def test_section_figure_follows_the_style_and_absent_data_is_one_line():
    from tests import figure_checks
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.topics.precision import report as eight_bit_plots

    fig = eight_bit_plots.plot_speed(p8.engine_speed(_bench(180.0)))
    assert figure_checks.problems(fig) == []
    assert {t.name for t in fig.data} == {
        "eager/fp16/nhwc",
        "cudagraph/fp16/nhwc",
        "cudagraph/fp8/nhwc",
        "cudagraph/int8/nhwc",
    }
    root = open_root("cpu")
    for section in (
        eight_bit_plots.speed_section,
        eight_bit_plots.breakdown_section,
        eight_bit_plots.error_section,
    ):
        line = section(root)
        assert isinstance(line, str) and "\n" not in line and root.name in line


def test_engine_speed_carries_the_handoff_count_where_the_bench_has_it():
    old = p8.engine_speed(_bench(180.0))
    assert old.quant_handoffs.isna().all()  # measured before hand-off
    b = _bench(180.0)
    b["quant_handoffs"] = b.precision.map({"int8": 20.0})
    s = p8.engine_speed(b).set_index("variant")
    assert s.loc["cudagraph/int8/nhwc", "quant_handoffs"].tolist() == [20.0, 20.0]
    assert s.loc["cudagraph/fp16/nhwc", "quant_handoffs"].isna().all()


def test_fastest_fp16_is_chosen_per_width_and_batch():
    """A compiled fp16 engine faster at one batch only is the reference there, the CUDA graph
    elsewhere; the ratio to the fp16 CUDA graph stays the graph's."""
    b16 = _bench(180.0).assign(batch=16)
    compiled = b16[b16.variant == "cudagraph/fp16/nhwc"].assign(variant="compile/fp16/nhwc")
    compiled["img_per_s"] *= 1.5
    speed = p8.engine_speed(pd.concat([_bench(180.0), b16, compiled], ignore_index=True))
    s = speed.set_index(["batch", "width", "variant"])
    assert s.loc[(16, 1.0, "cudagraph/int8/nhwc"), "fastest_fp16"] == "compile/fp16/nhwc"
    assert s.loc[(64, 1.0, "cudagraph/int8/nhwc"), "fastest_fp16"] == "cudagraph/fp16/nhwc"
    assert s.loc[(16, 1.0, "cudagraph/int8/nhwc"), "vs_fastest_fp16"] == pytest.approx(1.0)
    assert s.loc[(16, 1.0, "cudagraph/int8/nhwc"), "vs_cudagraph_fp16"] == pytest.approx(1.5)
    assert p8.speed_grid(speed).index.names == ["batch", "width"]


def _kernels(int8_conv_us: float, quant_us: float = 100.0):
    """Kineto-like rows of one fp16 and one int8 forward of width 1.0: fp16 runs a convolution,
    a bias add, a SiLU and a concatenation; int8 a convolution, its quantiser and the same copy."""
    conv = "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32"
    add = "elementwise_kernel<CUDAFunctor_add<c10::Half>>"
    rows = []
    for cfg, kernels in (
        ("yolov8_w1_fp16_nhwc_b64", [(conv, "tensor_core_conv", 1000.0), (add, "elementwise",
                                      300.0), ("silu_kernel", "elementwise", 200.0),
                                     ("CatArrayBatchedCopy", "copy_concat", 400.0)]),
        ("yolov8_w1_int8_nhwc_b64", [(conv, "tensor_core_conv", int8_conv_us),
                                     ("_quantize_int8", "other", quant_us),
                                     ("CatArrayBatchedCopy", "copy_concat", 400.0)]),
    ):  # fmt: skip
        for it in (0, 1):
            for name, cls, us in kernels:
                rows.append(
                    {"config": cfg, "iteration": it, "kernel_name": name, "kernel_class": cls,
                     "duration_us": us}
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_int8_trace_table_and_its_rules_flip():
    t = p8.trace_table(p8.int8_breakdown(_kernels(600.0))).iloc[0]
    assert t.width == 1.0 and t.fp16_ms == pytest.approx(1.9) and t.int8_ms == pytest.approx(1.1)
    assert t.conv_ratio == pytest.approx(0.6) and t.quantise_ms == pytest.approx(0.1)
    assert t.quantise_over_saving == pytest.approx(0.1 / (1.5 - 0.6))
    assert t.unchanged_pct == pytest.approx(100 * 0.4 / 1.1)
    fast = p8.trace_facts(p8.trace_table(p8.int8_breakdown(_kernels(600.0))))
    assert _verdict("precision_int8_convs_faster", fast) == HOLDS
    assert _verdict("precision_int8_quantise_pays", fast) == HOLDS
    assert _verdict("precision_int8_leaves_fp16_parts", fast) == HOLDS
    slow = p8.trace_facts(p8.trace_table(p8.int8_breakdown(_kernels(1200.0, quant_us=900.0))))
    assert _verdict("precision_int8_convs_faster", slow) == FAILS
    assert _verdict("precision_int8_quantise_pays", slow) == FAILS
    assert p8.trace_facts(p8.trace_table(p8.int8_breakdown(_kernels(600.0).iloc[:0]))) == []


def _occupied(int8_registers: int):
    """:func:`_kernels` with launch figures: fp16's convolution at 18.75 % theoretical
    occupancy, int8's at 18.75 % with 168 registers per thread or 37.5 % with fewer."""
    k = _kernels(600.0)
    conv = k.kernel_class == "tensor_core_conv"
    int8_conv = conv & k.config.str.contains("int8")
    k["theoretical_occupancy_pct"] = 100.0
    k.loc[conv, "theoretical_occupancy_pct"] = 18.75
    k.loc[int8_conv, "theoretical_occupancy_pct"] = 18.75 if int8_registers >= 168 else 37.5
    k["est_occupancy_pct"] = k.theoretical_occupancy_pct - 1.0
    k["registers_per_thread"] = 32
    k.loc[conv, "registers_per_thread"] = 168
    k.loc[int8_conv, "registers_per_thread"] = int8_registers
    k["shared_mem_per_block_bytes"] = 0
    k.loc[conv, "shared_mem_per_block_bytes"] = 200 * 1024
    return k


def test_part_occupancy_weights_by_time_and_the_occupancy_rule_flips():
    t = p8.part_occupancy(_occupied(168)).set_index(["config", "part"])
    fp16 = "yolov8_w1_fp16_nhwc_b64"
    row = t.loc[(fp16, "convolution (tensor cores)")]
    assert (row.kernels, row.ms) == (1.0, pytest.approx(1.0))  # per forward (2 were traced)
    assert row.share_pct == pytest.approx(100 * 1.0 / 1.9)
    assert (row.theoretical_occupancy_tw_pct, row.shared_mem_kib_tw) == (18.75, 200.0)
    assert list(t.loc[fp16].index)[:2] == ["convolution (tensor cores)", "add (bias, residual)"]
    same = p8.conv_occupancy(p8.part_occupancy(_occupied(168)), "int8")
    assert same.width.tolist() == [1.0] and same.theoretical_gap_pts.tolist() == [0.0]
    facts = p8.conv_occupancy_facts(same, "int8", p8.TRACE_INT8)
    assert _verdict("precision_int8_conv_occupancy_as_fp16", facts) == HOLDS
    more = p8.conv_occupancy(p8.part_occupancy(_occupied(80)), "int8")
    assert more.theoretical_gap_pts.tolist() == [18.75]
    facts = p8.conv_occupancy_facts(more, "int8", p8.TRACE_INT8)
    assert _verdict("precision_int8_conv_occupancy_as_fp16", facts) == FAILS
    assert p8.conv_occupancy(p8.part_occupancy(_occupied(168)), "fp8").empty  # no fp8 config
    assert p8.conv_occupancy_facts(more.iloc[:0], "int8", p8.TRACE_INT8) == []


def test_the_occupancy_section_shows_each_trace_it_holds_or_says_what_it_lacks(make_root):
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.topics.precision import report as eight_bit_plots

    only_int8 = eight_bit_plots.occupancy_section(open_root(make_root("i", [p8.TRACE_INT8])))
    assert isinstance(only_int8, tuple) and len(only_int8) == 2  # the convolutions, one trace
    both = open_root(make_root("b", [p8.TRACE_INT8, p8.TRACE_FP8]))
    assert len(eight_bit_plots.occupancy_section(both)) == 3
    assert {f["key"] for f in p8.occupancy_facts(both)} == {
        "int8_conv_occupancy_gap_max",
        "fp8_conv_occupancy_gap_max",
    }
    lacking = eight_bit_plots.occupancy_section(open_root(make_root("n", ["ceilings"])))
    assert isinstance(lacking, str) and p8.TRACE_INT8 in lacking

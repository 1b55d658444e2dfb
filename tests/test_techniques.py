"""The techniques table (fusion, autocast vs a half model, batch buffer): the collectors on the
CPU at tiny sizes, the fused ResNet against the unfused one, the autocast dtype recorder, the
assemblers, the kernel mix, and the facts and rules (moved across their thresholds)."""

import math

import pandas as pd
import pytest
import torch
import yaml
from torch import nn

from tests.test_audit_topics import Root
from yolo_sm.analyse.kernels import classify
from yolo_sm.contract import plans as contract_plans
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import problems
from yolo_sm.core import plans as collect
from yolo_sm.report import rules
from yolo_sm.report.rules import topic_rules
from yolo_sm.topics.techniques import analyse
from yolo_sm.topics.techniques.collect import (
    assemblers,
    dtype_summary,
    fusion_models,
    output_dtypes,
)

RULES = topic_rules("techniques")

TINY = {
    "device": "cpu",
    "warmup_ms": 2,
    "budget_ms": 10,
    "resnet_depth": 18,
    "resnet_imgsz": 64,
    "resnet_batches": (1,),
    "widths": (0.25,),
    "autocast_batches": (2,),
    "buffer_width": 0.25,
    "buffer_batches": (2,),
    "imgsz": 64,
}


@pytest.fixture(scope="module")
def resnets():
    return fusion_models(18)


def test_fusion_keeps_the_arithmetic_and_removes_batchnorms(resnets):
    from yolo_sm.core.models.fused import ConvAddReLU, ConvReLU, count_modules

    bn = {v: count_modules(m, nn.BatchNorm2d) for v, m in resnets.items()}
    assert bn["bn_unfused"] == 20 and bn["bn_folded"] == 0 and bn["conv_bias_relu"] == 0
    fused = resnets["conv_bias_relu"]
    # resnet18: the stem, 8 blocks x (1 conv+relu, 1 conv+add+relu), the head's conv+relu
    assert count_modules(fused, ConvReLU) == 10 and count_modules(fused, ConvAddReLU) == 8
    assert count_modules(fused, nn.ReLU) == 0 and count_modules(fused, nn.Conv2d) == 1
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        out = {v: m(x) for v, m in resnets.items()}
    ref = out["bn_unfused"]
    for v in ("bn_folded", "conv_bias_relu"):
        assert out[v].shape == ref.shape
        assert float((out[v] - ref).norm() / ref.norm()) < 1e-4, v


def test_fusing_needs_the_batchnorms_folded_first(resnets):
    from yolo_sm.core.models.fused import fuse_conv_relu

    with pytest.raises(UserError, match="fuse the BatchNorms"):
        fuse_conv_relu(resnets["bn_unfused"])


def test_autocast_recorder_finds_the_layers_kept_in_fp32():
    # CPU autocast runs avg_pool3d in fp32 (a 4-D input is one unbatched volume)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.AvgPool3d(1), nn.ReLU(), nn.Conv2d(4, 4, 1), nn.SiLU()
    )
    records = output_dtypes(model, torch.rand(2, 3, 8, 8), "cpu", torch.bfloat16)
    assert [r["layer"] for r in records] == ["0", "1", "2", "3", "4"]
    assert [r["output_dtype"] for r in records] == [
        "bfloat16", "float32", "float32", "bfloat16", "bfloat16"
    ]  # fmt: skip
    by = {s["module_type"]: s for s in dtype_summary(records)}
    assert by["Conv2d"]["calls"] == 2 and by["Conv2d"]["fp32_output_calls"] == 0
    assert by["AvgPool3d"]["fp32_output_calls"] == 1 and by["AvgPool3d"]["upcast_calls"] == 1
    # fp32 in, fp32 out: kept in fp32 but not cast up by autocast
    assert by["ReLU"]["fp32_output_calls"] == 1 and by["ReLU"]["upcast_calls"] == 0
    assert by["SiLU"]["fp32_output_calls"] == 0
    assert not any(m._forward_hooks for m in model.modules())  # hooks removed


def test_assemblers_build_the_same_batch_in_place_or_anew():
    frames = [torch.rand(8, 8, 3) for _ in range(3)]
    buf = torch.empty(3, 8, 8, 3)
    out = {k: fn().clone() for k, fn in assemblers(frames, buf).items()}
    want = torch.stack(frames).permute(0, 3, 1, 2)
    for k, v in out.items():
        assert torch.equal(v, want), k
    fns = assemblers(frames, buf)
    assert fns["prealloc_copy"]().data_ptr() == buf.data_ptr()
    assert fns["prealloc_stack_out"]().data_ptr() == buf.data_ptr()
    assert fns["stack_new"]().data_ptr() != buf.data_ptr()
    assert fns["prealloc_copy"]().is_contiguous(memory_format=torch.channels_last)
    # a CUDA graph's static input (channels-last) is the buffer: the variants hand it over
    # itself, so the graph's runner copies nothing
    static_in = torch.empty(3, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    fns = assemblers(frames, static_in.permute(0, 2, 3, 1), static_in)
    assert fns["prealloc_copy"]() is static_in and fns["prealloc_stack_out"]() is static_in
    assert torch.equal(static_in, want)


def test_kernel_mix_counts_per_forward_and_shares_time():
    k = pd.DataFrame(
        {
            "kernel_class": ["tensor_core_conv", "elementwise", "elementwise", "copy_concat"] * 2,
            "duration_us": [60.0, 20.0, 10.0, 10.0] * 2,
        }
    )
    mix = analyse.kernel_mix_of(k, iters=2)
    assert mix["kernels_per_forward"] == 4 and mix["elementwise_kernels_per_forward"] == 2
    assert mix["kernel_time_ms"] == pytest.approx(0.1)
    assert mix["elementwise_time_pct"] == pytest.approx(30.0)
    assert mix["matrix_time_pct"] == pytest.approx(60.0) and mix["copy_time_pct"] == 10.0
    assert all(math.isnan(v) for v in analyse.kernel_mix_of(None, 2).values())


def test_eval_batchnorm_kernels_are_elementwise():
    assert classify("void at::native::batch_norm_transform_input_channels_last_kernel<h>") == (
        "elementwise"
    )
    assert classify("cudnn::bn_fw_inf_1C11_kernel_NCHW<__half, float, true, 1>") == "elementwise"


def test_plan_step_collects_every_technique_on_the_cpu(tmp_path):
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in TINY.items()}
    params.pop("device")
    params["backends"] = ["eager", "cudagraph"]
    step = {"name": "techniques", "kind": "techniques", "out": "techniques.parquet"}
    p = tmp_path / "plan.yaml"
    p.write_text(
        yaml.safe_dump({"name": "t", "device": "cpu", "steps": [{**step, "params": params}]})
    )
    plan = contract_plans.load_plan(p)
    out = tmp_path / "data"
    assert collect.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    df = pd.read_parquet(out / "techniques.parquet")
    assert problems(df, "techniques") == []
    eager = df[df.backend.isin(["eager", "none"]) & (df.technique != "autocast_dtypes")]
    assert (eager.status == "ok").all(), eager.message.tolist()
    assert (eager.img_per_s > 0).all() and (eager.n_samples >= 5).all()
    graph = df[df.backend == "cudagraph"]
    assert len(graph) == 3 + 2 + 3 and (graph.status == "error").all()
    assert graph.message.str.contains("needs a CUDA device").all()
    fusion = eager[eager.technique == "fusion"].set_index("variant")
    assert sorted(fusion.index) == ["bn_folded", "bn_unfused", "conv_bias_relu"]
    assert fusion.bn_modules["bn_unfused"] > 0 and fusion.bn_modules["conv_bias_relu"] == 0
    assert fusion.fused_conv_modules["conv_bias_relu"] > 0
    assert (fusion.rel_err < 0.05).all()  # bf16 on the CPU, against eager fp32
    auto = eager[eager.technique == "autocast"].set_index("variant")
    assert sorted(auto.index) == ["autocast", "half_model"] and (auto.rel_err < 0.05).all()
    dtypes = df[df.technique == "autocast_dtypes"]
    assert {"Conv", "C2f", "Detect"} <= set(dtypes.module_type) and (dtypes.calls > 0).all()
    buf = eager[eager.technique == "batch_buffer"]
    assert sorted(buf.scope.unique()) == ["assembly", "step"]
    assert buf.groupby("scope").variant.nunique().tolist() == [3, 3]
    assert (buf.static_buffer == (buf.variant != "stack_new")).all()
    assert not buf.graph_input_copy.any()
    assert df.prov_torch.notna().all()


def test_unknown_technique_or_backend_is_one_sentence(tmp_path):
    bad = tmp_path / "bad.yaml"
    for params, word in (
        ("{techniques: [pruning]}", "pruning"),
        ("{backends: [compile]}", "compile"),
    ):
        bad.write_text(
            "name: x\nsteps:\n  - {name: t, kind: techniques, out: t.parquet, params: "
            + params
            + "}\n"
        )
        with pytest.raises(UserError, match=word):
            contract_plans.load_plan(bad)


# --- facts and rules on a hand-made table -----------------------------------------------------


def _row(technique, variant, backend, batch, img_per_s, **kw):
    return {
        "technique": technique,
        "model": "m",
        "variant": variant,
        "backend": backend,
        "scope": kw.pop("scope", "forward"),
        "batch": batch,
        "precision": "fp16",
        "device": "cuda",
        "status": "ok",
        "message": "",
        "img_per_s": img_per_s,
        "median_ms": batch * 1e3 / img_per_s if img_per_s else math.nan,
        **kw,
    }


def synthetic(fused=2.0, folded=1.02, autocast=0.95, fp32_types=0, prealloc=1.2, fused_ew=20.0):
    rows = []
    for backend in ("eager", "cudagraph"):
        for batch in (1, 16, 64):
            for v, speed, ew, k in (
                ("bn_unfused", 1.0, 63.0, 300),
                ("bn_folded", folded, 62.0, 300),
                ("conv_bias_relu", fused, fused_ew, 110),
            ):
                rows.append(
                    _row("fusion", v, backend, batch, 100.0 * speed, elementwise_time_pct=ew,
                         kernels_per_forward=k, rel_err=1e-3)
                )  # fmt: skip
        for width in (0.5, 1.0):
            for batch in (16, 64):
                rows.append(_row("autocast", "half_model", backend, batch, 1000.0, width=width,
                                 rel_err=2e-3))  # fmt: skip
                rows.append(_row("autocast", "autocast", backend, batch, 1000.0 * autocast,
                                 width=width, rel_err=2e-3))  # fmt: skip
        for batch in (16, 64):
            for v, speed in (("stack_new", 1.0), ("prealloc_copy", 0.9),
                             ("prealloc_stack_out", prealloc)):  # fmt: skip
                rows.append(_row("batch_buffer", v, backend, batch, 500.0 * speed, scope="step"))
    for v, speed in (("stack_new", 1.0), ("prealloc_copy", 0.5), ("prealloc_stack_out", 1.3)):
        rows.append(_row("batch_buffer", v, "none", 16, 1e5 * speed, scope="assembly"))
    for width in (0.5, 1.0):
        for i, t in enumerate(("Conv", "C2f", "Detect", "Upsample")):
            rows.append(
                _row("autocast_dtypes", "autocast", "eager", 2, math.nan, scope="dtypes",
                     width=width, module_type=t, calls=4,
                     fp32_output_calls=int(i < fp32_types), upcast_calls=0)
            )  # fmt: skip
    return pd.DataFrame(rows)


def _facts(df):
    return analyse.facts(Root(techniques=df))


def _verdicts(df):
    return rules.evaluate(RULES, _facts(df)).set_index("id").verdict


def test_facts_read_the_side_by_side_ratios():
    facts = _facts(synthetic()).set_index(["key", "scope"]).value
    assert facts["techniques.fusion_speedup", "backend=eager,batch=16"] == pytest.approx(2.0)
    assert facts["techniques.bn_fold_speedup", "backend=cudagraph,batch=64"] == pytest.approx(1.02)
    assert facts["techniques.fusion_elementwise_drop_pct", "backend=eager,batch=16"] == 43.0
    eager16 = "backend=eager,batch=16"
    assert facts["techniques.autocast_over_half_median", eager16] == pytest.approx(0.95)
    # torch.stack(out=buffer): +20 % on the step, +30 % on the assembly alone
    assert facts["techniques.buffer_step_gain_pct", eager16] == pytest.approx(20.0)
    none16 = "backend=none,batch=16"
    assert facts["techniques.buffer_assembly_gain_pct", none16] == pytest.approx(30.0)
    assert set(facts.index.get_level_values("key")) <= analyse.FACT_KEYS


@pytest.mark.parametrize(
    "rule, holds, fails",
    [
        ("techniques_fusion_b16", {"fused": 1.5}, {"fused": 1.01}),
        ("techniques_fusion_b16_graph", {"fused": 1.3}, {"fused": 0.9}),
        ("techniques_bn_fold_alone_small", {"folded": 1.02}, {"folded": 1.3}),
        ("techniques_fusion_elementwise_drop", {"fused_ew": 10.0}, {"fused_ew": 60.0}),
        ("techniques_autocast_near_half", {"autocast": 0.97}, {"autocast": 0.5}),
        ("techniques_buffer_gain", {"prealloc": 1.2}, {"prealloc": 1.01}),
    ],
)
def test_rules_flip_with_their_facts(rule, holds, fails):
    assert _verdicts(synthetic(**holds))[rule] == rules.HOLDS
    assert _verdicts(synthetic(**fails))[rule] == rules.FAILS


def test_rules_are_not_tested_without_the_table():
    v = rules.evaluate(RULES, _facts(synthetic().iloc[0:0]))
    assert (v.verdict == rules.NOT_TESTED).all()


def test_failed_rows_are_listed_and_left_out_of_the_ratios():
    df = synthetic()
    i = df.index[(df.variant == "conv_bias_relu") & (df.batch == 16) & (df.backend == "eager")]
    df.loc[i, ["status", "message"]] = ["error", "RuntimeError: no plan"]
    assert analyse.failures(df).message.tolist() == ["RuntimeError: no plan"]
    assert _verdicts(df)["techniques_fusion_b16"] == rules.NOT_TESTED


def test_figures_follow_the_style():
    from tests.figure_checks import problems as style_problems
    from yolo_sm.topics.techniques import report as tp

    root = Root(techniques=synthetic())
    figs = [tp.fusion_figure(root), tp.elementwise_figure(root), tp.autocast_figure(root),
            tp.buffer_figure(root)]  # fmt: skip
    for f in figs:
        assert f.data and style_problems(f) == [], f.layout.title.text


@pytest.mark.notebooks
def test_notebook_renders_every_section_from_a_techniques_table(make_root):
    """13 executes from a root holding a (synthetic) techniques table beside the shipped
    ResNet-101 Nsight Compute table: every section draws, no section says its data is missing."""
    from pathlib import Path

    from tests.test_notebooks import _executes_and_renders, _outputs_text
    from yolo_sm.contract.manifest import register

    root = make_root("h200", ["ncu_resnet101"])
    df = synthetic(fp32_types=1)
    df["width"] = df["width"].fillna(1.0)
    df.to_parquet(root / "techniques.parquet")
    register(root, "techniques", "techniques.parquet", "techniques", "SYNTHETIC", "test")
    path = Path(__file__).resolve().parent.parent / "notebooks" / "13_techniques.ipynb"
    nb, html = _executes_and_renders(path, root)
    assert html.count("Plotly.newPlot") >= 5
    text = _outputs_text(nb)
    assert "holds no" not in text and "techniques_fusion_b16" in text


def test_the_fusion_resnet_is_well_conditioned_in_16_bits():
    """At random weights the ResNet detector's bf16 forward lies far from fp32 unless its
    residual branches are damped; the fusion technique's models are."""
    import copy

    from yolo_sm.core.models.resnet import resnet_backbone
    from yolo_sm.topics.techniques.collect import RESIDUAL_SCALE

    x = torch.rand(2, 3, 128, 128)

    def err(model):
        with torch.no_grad():
            ref = model(x)
            low = copy.deepcopy(model).to(torch.bfloat16)(x.to(torch.bfloat16))
        ref, low = (o[0] if isinstance(o, (list, tuple)) else o for o in (ref, low))
        return float((low.float() - ref).norm() / ref.norm())

    assert err(resnet_backbone(50, fuse=False)) > 0.1
    assert err(resnet_backbone(50, fuse=False, residual_scale=RESIDUAL_SCALE)) < 0.02
    assert err(fusion_models(50)["bn_unfused"]) < 0.02

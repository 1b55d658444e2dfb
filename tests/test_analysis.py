"""Time-weighted views: a long kernel outweighs many short ones."""

import pandas as pd
import pytest

from yolo_sm.analyse import weighting
from yolo_sm.core import numerics


def test_time_weighted_occupancy_weights_by_duration():
    df = pd.DataFrame(
        {
            "layer": ["a", "a", "a", "b"],
            "duration_us": [1.0, 1.0, 98.0, 5.0],
            "theoretical_occupancy_pct": [100.0, 100.0, 18.75, 50.0],
            "achieved_occupancy_pct": [90.0, 80.0, 15.0, 40.0],
        }
    )
    out = weighting.time_weighted(df, "layer").set_index("layer")
    assert out.loc["a", "kernels"] == 3 and out.loc["a", "time_us"] == 100.0
    assert out.loc["a", "theoretical_occupancy_tw_pct"] == pytest.approx((200 + 98 * 18.75) / 100)
    assert out.loc["a", "achieved_occupancy_tw_pct"] == pytest.approx((90 + 80 + 98 * 15) / 100)
    assert out.loc["b", "theoretical_occupancy_tw_pct"] == 50.0
    # the plain mean would say 72.9 % for layer a: the weighting matters
    assert df[df.layer == "a"].theoretical_occupancy_pct.mean() > 70
    assert df.equals(df.copy())  # input untouched


def test_time_weighted_of_no_kernel_is_an_empty_table_with_its_columns():
    # a compiled graph's trace attributes no kernel to a layer: nothing is left to group
    empty = pd.DataFrame(columns=["layer", "duration_us", "est_occupancy_pct", "sm_busy_pct"])
    out = weighting.time_weighted(empty, "layer", cols=("est_occupancy_pct", "sm_busy"))
    assert out.empty and out.kernels.dtype == int
    assert list(out) == ["layer", "kernels", "time_us", "est_occupancy_tw_pct", "sm_busy_tw"]


def test_same_run_ratio_is_baseline_over_other():
    df = pd.DataFrame(
        {
            "width": [1.0] * 4,
            "layout": ["nhwc"] * 4,
            "batch": [1, 1, 64, 64],
            "backend": ["eager"] * 4,
            "precision": ["fp32", "fp16", "fp32", "fp16"],
            "median_ms": [4.0, 4.0, 200.0, 32.0],
            "status": ["ok"] * 4,
        }
    )
    r = weighting.same_run_ratio(df).set_index("batch")
    assert r.loc[1, "ratio"] == 1.0 and r.loc[64, "ratio"] == pytest.approx(6.25)
    with pytest.raises(ValueError, match="bf16"):
        weighting.same_run_ratio(df, baseline="bf16")


def test_numerical_errors_grow_as_precision_drops(tiny_yolo):
    e = numerics.numerical_errors(tiny_yolo, imgsz=64, seeds=(1, 2))
    med = e.groupby("precision").rel_err.median()
    assert med["fp32"] < 1e-5 < med["fp16"] < med["bf16"]
    assert (e.rel_err <= e.tolerance).all()


def test_sm_coverage():
    assert weighting.sm_coverage(2.1) == pytest.approx(2.1 / 3)
    assert weighting.sm_coverage(3.0) == 1.0 and weighting.sm_coverage(0.25) == 0.25
    assert list(weighting.sm_coverage(pd.Series([1.5, 4.0]))) == [0.75, 1.0]


def test_layer_view_per_layer():
    df = pd.DataFrame(
        {
            "layer": ["model.0", "model.0", "model.22"],
            "module_type": ["Conv", "Conv", "Detect"],
            "stage": ["backbone", "backbone", "head"],
            "kernel_name": [
                "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc",
                "void at::vectorized_elementwise_kernel<4, at::silu_kernel>",
                "void at::vectorized_elementwise_kernel<4, at::silu_kernel>",
            ],
            "duration_us": [30.0, 10.0, 60.0],
            "theoretical_occupancy_pct": [18.75, 100.0, 100.0],
            "waves": [2.1, 6.0, 0.5],
            "limiter": ["registers", "warps", "warps"],
        }
    )
    v = weighting.layer_view(df).set_index("layer")
    assert v.loc["model.0", "time_share"] == pytest.approx(0.4)
    assert v.loc["model.0", "theoretical_occupancy_tw_pct"] == pytest.approx(
        (30 * 18.75 + 10 * 100) / 40
    )
    assert v.loc["model.0", "tensor_core_time_share"] == pytest.approx(0.75)
    assert v.loc["model.0", "main_limiter"] == "registers"
    assert v.loc["model.22", "sm_coverage_tw"] == pytest.approx(0.5)
    assert v.loc["model.0", "sm_coverage_tw"] == pytest.approx((30 * 0.7 + 10 * 1.0) / 40)


def test_time_weighted_skips_missing_values():
    df = pd.DataFrame(
        {
            "g": ["a", "a"],
            "duration_us": [10.0, 30.0],
            "theoretical_occupancy_pct": [50.0, float("nan")],
            "achieved_occupancy_pct": [float("nan"), float("nan")],
        }
    )
    out = weighting.time_weighted(df, "g").iloc[0]
    assert out.theoretical_occupancy_tw_pct == 50.0
    assert pd.isna(out.achieved_occupancy_tw_pct)


def test_photo_errors_with_the_bench_class_prior_leaves_the_model_alone(tiny_yolo):
    import torch

    before = [p.detach().clone() for p in tiny_yolo.parameters()]
    built = numerics.photo_errors(tiny_yolo, ("fp16",), imgsz=64)
    prior = numerics.photo_errors(tiny_yolo, ("fp16",), imgsz=64, class_prior=True)
    assert built.class_prior.tolist() == [False] and prior.class_prior.tolist() == [True]
    assert prior.rel_err.iloc[0] != built.rel_err.iloc[0]  # another model: other logits
    assert all(torch.equal(a, b) for a, b in zip(before, tiny_yolo.parameters(), strict=True))

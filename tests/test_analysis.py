"""Time-weighted views: a long kernel outweighs many short ones."""

import pandas as pd
import pytest

from yolo_sm import analysis


def test_time_weighted_occupancy_weights_by_duration():
    df = pd.DataFrame(
        {
            "layer": ["a", "a", "a", "b"],
            "duration_us": [1.0, 1.0, 98.0, 5.0],
            "theoretical_occupancy_pct": [100.0, 100.0, 18.75, 50.0],
            "achieved_occupancy_pct": [90.0, 80.0, 15.0, 40.0],
        }
    )
    out = analysis.time_weighted(df, "layer").set_index("layer")
    assert out.loc["a", "kernels"] == 3 and out.loc["a", "time_us"] == 100.0
    assert out.loc["a", "theoretical_occupancy_tw_pct"] == pytest.approx((200 + 98 * 18.75) / 100)
    assert out.loc["a", "achieved_occupancy_tw_pct"] == pytest.approx((90 + 80 + 98 * 15) / 100)
    assert out.loc["b", "theoretical_occupancy_tw_pct"] == 50.0
    # the plain mean would say 72.9 % for layer a: the weighting matters
    assert df[df.layer == "a"].theoretical_occupancy_pct.mean() > 70
    assert df.equals(df.copy())  # input untouched


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
    r = analysis.same_run_ratio(df).set_index("batch")
    assert r.loc[1, "ratio"] == 1.0 and r.loc[64, "ratio"] == pytest.approx(6.25)
    with pytest.raises(ValueError, match="bf16"):
        analysis.same_run_ratio(df, baseline="bf16")


def test_numerical_errors_grow_as_precision_drops(tiny_yolo):
    e = analysis.numerical_errors(tiny_yolo, imgsz=64, seeds=(1, 2))
    med = e.groupby("precision").rel_err.median()
    assert med["fp32"] < 1e-5 < med["fp16"] < med["bf16"]
    assert (e.rel_err <= e.tolerance).all()

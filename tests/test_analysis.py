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

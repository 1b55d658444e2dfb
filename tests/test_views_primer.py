"""Notebook 00's tables on the shipped H200 data."""

import pytest

from yolo_sm.analyse import primer
from yolo_sm.contract import datasets
from yolo_sm.report import primer_plots


def test_wave_table_tail():
    t = primer.wave_table([132, 133, 300], active_blocks_per_sm=1, sm_count=132).set_index(
        "grid_size"
    )
    assert t.loc[132, "waves"] == 1 and t.loc[132, "sm_slots_busy"] == 1
    assert t.loc[133, "blocks_in_last_wave"] == 1
    assert t.loc[133, "sm_slots_busy"] == pytest.approx(133 / 264)
    assert t.loc[300, "blocks_in_last_wave"] == 36


def test_tensor_core_time_sits_at_one_block_per_sm():
    ncu = datasets.load("h200/ncu_width_b8")
    lv = primer.tensor_core_occupancy_levels(ncu[ncu.config == "yolov8_w1_fp16_nhwc_b8"])
    top = lv.iloc[0]
    assert top.theoretical_occupancy_pct == 18.75 and top.time_share > 0.5
    assert (top.block_size, top.registers_per_thread) == (384, 168)
    assert lv.time_share.sum() == pytest.approx(1.0)


def test_low_occupancy_kernels_keep_the_tensor_pipes_busy():
    wide = primer.pipe_vs_occupancy(datasets.load("h200/ncu_wide_stack"))
    tc = wide[(wide.config == "wide_w2_fp16_nhwc_b8") & (wide.kernel_class == "tensor_core_conv")]
    assert primer.time_weighted(tc, "achieved_occupancy_pct") < 25
    assert primer.time_weighted(tc, "tensor_pipe_pct") > 70


def test_findings_quote_the_data():
    text = primer_plots.findings(
        datasets.load("h200/ncu_width_b8"),
        "yolov8_w1_fp16_nhwc_b8",
        datasets.load("h200/ncu_wide_stack"),
        datasets.load("h200/trace_width_b8"),
        datasets.load("h200/profile_layers"),
    )
    assert text.count("\n- ") == 3 and "nan" not in text
    assert "384 threads per block with 168 registers" in text

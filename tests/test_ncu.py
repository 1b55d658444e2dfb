"""Nsight Compute loader on a small real H200 capture (ncu --csv --page raw, with preamble)."""

from pathlib import Path

import pytest

from yolo_sm.collect.profiling import ncu
from yolo_sm.contract.errors import NotAvailableError, UserError

FIXTURES = Path(__file__).parent / "fixtures"
RAW = FIXTURES / "ncu_raw_h200_small.csv"


def test_raw_page_loads_one_row_per_kernel_with_units_applied():
    df = ncu.load_ncu(RAW)
    assert len(df) == 20 and list(df.kernel_id) == list(range(20))
    for col in (
        "kernel_name",
        "duration_us",
        "achieved_occupancy_pct",
        "theoretical_occupancy_pct",
        "registers_per_thread",
        "shared_mem_per_block_bytes",
        "block_size",
        "grid_size",
        "waves_per_sm",
        "limit_registers",
        "nvtx_range",
        "nvtx_path",
    ):
        assert col in df, col
    first = df.iloc[0]
    assert first.kernel_name.startswith("sm80_xmma_fprop_implicit_gemm")
    assert first.block_size == 128 and first.grid_size == 6400
    assert first.registers_per_thread == 106 and first.theoretical_occupancy_pct == 25.0
    assert first.duration_us == pytest.approx(55.776)  # 55,776 ns in the file
    assert first.nvtx_path == "profiled_forward/yolov8_w0.25_fp16_nhwc_b8"
    assert first.nvtx_range == "yolov8_w0.25_fp16_nhwc_b8"
    assert (df.achieved_occupancy_pct <= df.theoretical_occupancy_pct + 1e-9).all()


def test_long_form_keeps_every_metric():
    long = ncu.load_ncu(RAW, long=True)
    assert set(long.columns) >= {"kernel_id", "metric", "unit", "value", "value_text"}
    assert long.metric.nunique() > 50  # the raw page carries device attributes too
    units = long[long.metric == "gpu__time_duration.sum"].unit.unique()
    assert list(units) == ["ns"]


@pytest.mark.parametrize(
    "text, exc, match",
    [
        ("", UserError, "no ncu CSV rows"),
        (
            "==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - no permission\n",
            NotAvailableError,
            "administrator",
        ),
    ],
)
def test_bad_files_give_one_clear_error(tmp_path, text, exc, match):
    p = tmp_path / "x.csv"
    p.write_text(text)
    with pytest.raises(exc, match=match):
        ncu.load_ncu(p)


def test_truncated_file_is_detected(tmp_path):
    text = RAW.read_text()
    p = tmp_path / "cut.csv"
    p.write_text(text[: int(len(text) * 0.6)])
    with pytest.raises(UserError, match="truncated|corrupt"):
        ncu.load_ncu(p)


def test_missing_file_and_tool(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="does not exist"):
        ncu.load_ncu(tmp_path / "nope.csv")
    monkeypatch.setenv("YOLO_SM_NCU", str(tmp_path / "no-ncu"))
    with pytest.raises(NotAvailableError, match="ncu"):
        ncu.command(["python", "x.py"], tmp_path / "o.csv")
    with pytest.raises(UserError, match="metric set"):
        ncu.command(["python", "x.py"], tmp_path / "o.csv", metric_set="nope")


def test_command_scopes_to_nvtx_and_leaves_clocks_alone(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv("YOLO_SM_NCU", str(fake))
    cmd = ncu.command(["python3", "t.py"], tmp_path / "o.csv")
    assert cmd[0] == str(fake) and cmd[-2:] == ["python3", "t.py"]
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--nvtx-include") + 1] == "profiled_forward/"
    assert set(cmd[cmd.index("--metrics") + 1].split(",")) == set(ncu.METRIC_SETS["occupancy"])

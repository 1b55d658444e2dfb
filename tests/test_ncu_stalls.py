"""The Nsight Compute ``stalls`` metric set: its metric names, a synthetic raw-page CSV with
those names loaded into tidy columns, the kernel filter on the command line, and the analysis of
the top kernel per layer."""

import csv
import io

import pandas as pd
import pytest

from yolo_sm.contract.errors import UserError
from yolo_sm.core.profiling import ncu
from yolo_sm.topics.heatmaps import analyse as stalls

NVTX = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
FWD = '""<default domain>:profiled_forward:none:none:none:none:none:none""'


def _range(name):
    return f'""<default domain>:{name}:none:none:none:none:none:none""'


def _csv(kernels) -> str:
    """A raw-page CSV (ncu --csv --page raw) with every metric of the stalls set: a header, a
    units row, one row per kernel ``(name, layer_range, values by metric)``."""
    metrics = list(ncu.METRIC_SETS["stalls"])
    units = {m: "" for m in metrics}
    units.update(
        {
            "gpu__time_duration.sum": "usecond",
            "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": "sector",
            "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": "Ksector",
            "l1tex__t_sector_hit_rate.pct": "%",
            "lts__t_sector_hit_rate.pct": "%",
            "sm__warps_active.avg.pct_of_peak_sustained_active": "%",
            "smsp__issue_active.avg.pct_of_peak_sustained_active": "%",
        }
    )
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["ID", "Kernel Name", NVTX, *metrics])
    w.writerow(["", "", "", *[units[m] for m in metrics]])
    for i, (name, layer, values) in enumerate(kernels):
        path = f"1 {FWD} {_range('yolov8_w1_fp16_nhwc_b8')} {_range(layer)}"
        w.writerow([str(i), name, path.replace('""', '"'), *[values.get(m, "0") for m in metrics]])
    return "==PROF== Connected to process 1\n" + out.getvalue()


def _stall(reason):
    return ncu.STALL_METRIC.format(reason)


KERNELS = [
    (
        "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64",
        "model.2 C2f [backbone]",
        {
            "gpu__time_duration.sum": "12.5",
            "smsp__thread_inst_executed_per_inst_executed.ratio": "32",
            "l1tex__t_sector_hit_rate.pct": "41.5",
            "lts__t_sector_hit_rate.pct": "77.25",
            "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": "0",
            "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": "0",
            _stall("long_scoreboard"): "1.5",
            _stall("math_pipe_throttle"): "6.0",
            _stall("barrier"): "0.5",
        },
    ),
    (
        "void at::vectorized_elementwise_kernel<8, silu>(int, T2, T3)",
        "model.2 C2f [backbone]",
        {
            "gpu__time_duration.sum": "3.0",
            "smsp__thread_inst_executed_per_inst_executed.ratio": "24",
            _stall("long_scoreboard"): "20",
        },
    ),
    (
        "cutlass__5x_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64>",
        "model.9 SPPF [backbone]",
        {
            "gpu__time_duration.sum": "1,250.0",
            "smsp__thread_inst_executed_per_inst_executed.ratio": "30.4",
            "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": "1,024",
            "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": "2",
            _stall("short_scoreboard"): "3",
            _stall("wait"): "1",
        },
    ),
]


@pytest.fixture
def stalls_csv(tmp_path):
    p = tmp_path / "stalls.csv"
    p.write_text(_csv(KERNELS))
    return p


def test_stalls_set_names_every_reason_once_with_a_column_each():
    names = ncu.METRIC_SETS["stalls"]
    assert len(names) == len(set(names))
    for r in ncu.STALL_REASONS:
        m = _stall(r)
        assert m in names and ncu.COLUMNS[m] == f"stall_{r}_cycles"
    for m in (
        "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
        "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
        "smsp__thread_inst_executed_per_inst_executed.ratio",
        "l1tex__t_sector_hit_rate.pct",
        "lts__t_sector_hit_rate.pct",
    ):
        assert m in names and m in ncu.COLUMNS


def test_a_stalls_csv_loads_into_tidy_columns(stalls_csv):
    df = ncu.load_ncu(stalls_csv)
    assert len(df) == 3 and list(df.layer) == ["model.2", "model.2", "model.9"]
    first, silu, spill = df.iloc[0], df.iloc[1], df.iloc[2]
    assert first.duration_us == pytest.approx(12.5)  # usecond -> ns -> us
    assert first.stall_math_pipe_throttle_cycles == 6.0 and first.stall_barrier_cycles == 0.5
    assert first.l1_hit_rate_pct == 41.5 and first.l2_hit_rate_pct == 77.25
    assert first.warp_execution_efficiency_pct == pytest.approx(100.0)
    assert silu.warp_execution_efficiency_pct == pytest.approx(75.0)
    assert spill.local_load_sectors == 1024 and spill.local_store_sectors == 2000  # Ksector
    assert spill.duration_us == pytest.approx(1250.0)


def test_top_kernel_per_layer_and_its_main_stall(stalls_csv):
    top = stalls.top_kernels(ncu.load_ncu(stalls_csv))
    assert list(top.layer) == ["model.2", "model.9"]  # the silu kernel is not model.2's longest
    conv = top.iloc[0]
    assert conv.top_stall == "math_pipe_throttle"
    assert conv.stall_cycles == pytest.approx(8.0) and conv.top_stall_share == pytest.approx(0.75)
    assert top.iloc[1].top_stall == "short_scoreboard"
    long = stalls.stalls_long(top)
    shares = long.groupby("layer").share.sum()
    assert shares.round(9).eq(1.0).all()
    # reasons under 1 % of every kernel's stall cycles are folded into "other" (all 0 here)
    named = {"barrier", "long_scoreboard", "math_pipe_throttle", "short_scoreboard", "wait"}
    assert set(long.reason) == named | {"other"}
    assert long[long.reason == "other"].cycles.sum() == 0
    spills = stalls.spill_kernels(ncu.load_ncu(stalls_csv))
    assert list(spills.layer) == ["model.9"]


def test_two_per_layer_keeps_the_second_kernel():
    rows = pd.DataFrame(
        {
            "config": ["c"] * 3,
            "layer": ["model.1", "model.1", "model.1"],
            "module_type": ["Conv"] * 3,
            "kernel_name": ["k1", "k2", "k3"],
            "duration_us": [1.0, 3.0, 2.0],
            "stall_wait_cycles": [1.0, 1.0, 1.0],
        }
    )
    top = stalls.top_kernels(rows, per_layer=2)
    assert list(top.kernel) == ["k2", "k3"]


def test_kernel_regex_reaches_the_command_line_and_a_bad_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/usr/bin/ncu")
    cmd = ncu.command(["python", "t.py"], tmp_path / "o.csv", "stalls", kernel_regex="xmma|gemm")
    i = cmd.index("--kernel-name")
    assert cmd[i + 1] == "regex:xmma|gemm" and "demangled" in cmd
    assert ",".join(ncu.METRIC_SETS["stalls"]) in cmd
    assert "--kernel-name" not in ncu.command(["python"], tmp_path / "o.csv", "stalls")
    with pytest.raises(UserError, match="regular expression"):
        ncu.command(["python"], tmp_path / "o.csv", "stalls", kernel_regex="(")

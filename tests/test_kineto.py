"""Kineto trace loading and layer attribution (unit tests on a tiny trace written here, and a real
CPU capture); the golden GPU trace test needs a capture from the H200."""

import gzip
import json

import pytest

from yolo_sm.contract.errors import UserError
from yolo_sm.core.profiling import kineto
from yolo_sm.core.profiling.nvtx import layer_ranges, parse_range, range_name


def _trace():
    cpu = {"ph": "X", "pid": 1, "tid": 7}
    ev = [
        {**cpu, "cat": "user_annotation", "name": "profiled_forward", "ts": 0, "dur": 1000},
        {**cpu, "cat": "user_annotation", "name": "model.0 Conv [backbone]", "ts": 10, "dur": 90},
        {**cpu, "cat": "user_annotation", "name": "model.22 Detect [head]", "ts": 100, "dur": 100},
        {**cpu, "cat": "user_annotation", "name": "profiled_forward", "ts": 2000, "dur": 500},
        {
            **cpu,
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "ts": 20,
            "dur": 5,
            "args": {"correlation": 5},
        },
        {
            **cpu,
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "ts": 150,
            "dur": 5,
            "args": {"correlation": 6},
        },
        {
            **cpu,
            "cat": "cuda_runtime",
            "name": "cudaGraphLaunch",
            "ts": 2100,
            "dur": 5,
            "args": {"correlation": 9},
        },
    ]
    gpu = {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel"}
    ev += [
        {
            **gpu,
            "name": "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc",
            "ts": 30,
            "dur": 40.5,
            "args": {
                "correlation": 5,
                "grid": [1, 400, 1],
                "block": [384, 1, 1],
                "registers per thread": 168,
                "shared memory": 200704,
                "est. achieved occupancy %": 19,
                "stream": 7,
                "device": 0,
            },
        },
        {
            **gpu,
            "name": "void at::vectorized_elementwise_kernel<4, at::silu_kernel>",
            "ts": 160,
            "dur": 3.0,
            "args": {
                "correlation": 6,
                "grid": [264, 1, 1],
                "block": [128, 1, 1],
                "registers per thread": 32,
                "shared memory": 0,
                "est. achieved occupancy %": 100,
                "stream": 7,
                "device": 0,
            },
        },
        {
            **gpu,
            "name": "void at::vectorized_elementwise_kernel<4, at::silu_kernel>",
            "ts": 2110,
            "dur": 3.0,
            "args": {
                "correlation": 9,
                "grid": [264, 1, 1],
                "block": [128, 1, 1],
                "registers per thread": 32,
                "shared memory": 0,
                "est. achieved occupancy %": 100,
                "stream": 7,
                "device": 0,
            },
        },
    ]
    return {
        "traceEvents": ev,
        "deviceProperties": [{"id": 0, "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
    }


def test_kernels_are_attributed_to_layers_and_iterations(tmp_path):
    p = tmp_path / "t.json.gz"
    with gzip.open(p, "wt") as fh:
        json.dump(_trace(), fh)
    df = kineto.load_kernels(p)
    assert list(df.layer) == ["model.0", "model.22", ""]  # the graph replay has no layer range
    assert list(df.module_type) == ["Conv", "Detect", ""]
    assert list(df.stage) == ["backbone", "head", ""]
    assert list(df.iteration) == [0, 0, 1]
    conv = df.iloc[0]
    assert conv.kernel_class == "tensor_core_conv" and conv.grid_size == 400
    assert conv.block_size == 384 and conv.theoretical_occupancy_pct == 18.75
    assert conv.limiter == "registers" and conv.est_occupancy_pct == 19
    assert conv.waves == pytest.approx(400 / 132)
    silu = df.iloc[1]
    assert silu.kernel_class == "elementwise" and silu.theoretical_occupancy_pct == 100.0
    assert silu.waves == pytest.approx(264 / (16 * 132))


def test_truncated_and_foreign_files(tmp_path):
    p = tmp_path / "t.json.gz"
    with gzip.open(p, "wt") as fh:
        json.dump(_trace(), fh)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(p.read_bytes()[:200])
    with pytest.raises(UserError, match="truncated or corrupt"):
        kineto.load_kernels(cut)
    other = tmp_path / "o.json"
    other.write_text("[1, 2]")
    with pytest.raises(UserError, match="traceEvents"):
        kineto.load_kernels(other)
    with pytest.raises(UserError, match="does not exist"):
        kineto.load_kernels(tmp_path / "none.json")


def test_range_names_round_trip():
    name = range_name("model.4", "C2f", "backbone")
    assert "/" not in name and parse_range(name) == {
        "layer": "model.4",
        "module_type": "C2f",
        "stage": "backbone",
    }
    assert parse_range("profiled_forward") is None


def test_cpu_capture_writes_trace_with_every_layer_range(tmp_path, tiny_yolo):
    import torch

    x = torch.rand(1, 3, 64, 64)
    path = kineto.capture(
        lambda: tiny_yolo(x),
        tmp_path / "cpu.json.gz",
        model=tiny_yolo,
        iters=2,
        warmup=1,
        device="cpu",
    )
    assert path.exists() and (tmp_path / "cpu.json.gz.metadata.json").exists()
    trace = kineto.read_trace(path)
    layers = {e["name"] for e in trace["traceEvents"] if parse_range(e.get("name", ""))}
    assert len(layers) == 23  # every YOLOv8 layer, model.0 ... model.22
    fwd = [
        e
        for e in trace["traceEvents"]
        if e.get("name") == "profiled_forward" and e.get("cat") == "user_annotation"
    ]
    assert len(fwd) == 2
    assert kineto.load_kernels(path).empty  # no GPU kernels on a CPU capture
    with pytest.raises(UserError, match=".json.gz"):
        kineto.capture(lambda: None, tmp_path / "x.json", device="cpu")


def test_layer_ranges_are_removed_even_after_an_error(tiny_yolo):
    import torch

    with pytest.raises(RuntimeError), layer_ranges(tiny_yolo):
        tiny_yolo(torch.rand(1, 4, 64, 64))  # wrong channel count fails inside model.0
    assert all(not m._forward_pre_hooks for m in tiny_yolo.modules())


# --- golden: a real H200 trace shipped in data/h200/traces ---------------------------------


def test_real_h200_trace_loads_with_every_kernel_in_a_layer():
    from pathlib import Path

    from yolo_sm.core.profiling.kineto import load_kernels

    root = Path(__file__).resolve().parents[1] / "data" / "h200" / "traces"
    df = load_kernels(root / "trace_width_b8-yolov8_w0.5_fp16_nhwc_b8.json.gz")
    fwd = df[df.iteration.notna()]
    assert set(fwd.iteration) == {0, 1}
    assert (fwd.groupby("iteration").size() == 237).all()  # the same kernels each forward
    assert (fwd.layer != "").all() and set(fwd.stage) == {"backbone", "neck", "head"}
    assert fwd.layer.nunique() == 23
    unclassified = fwd[fwd.kernel_class == "other"].duration_us.sum() / fwd.duration_us.sum()
    assert unclassified < 0.05
    # Kineto's estimate is the calculator's value capped by the grid: never above ours
    ok = fwd.est_occupancy_pct.notna()
    assert (fwd.est_occupancy_pct[ok] <= fwd.theoretical_occupancy_pct[ok] + 0.5).all()
    assert fwd.registers_per_thread.notna().all() and (fwd.waves > 0).all()

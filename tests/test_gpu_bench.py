"""The side-by-side bench on a GPU (marker ``gpu``; ``pytest -m gpu`` on a CUDA machine): a
tiny plan-shaped run checks what the CPU tests cannot - CUDA graph and torch.compile build
times, the CUDA pipeline at 1 and 3 streams (also in one CUDA graph per batch) against its
engine, YOLO.predict on the GPU."""

import pytest

pytestmark = pytest.mark.gpu


def test_tiny_bench_on_the_gpu(tmp_path):
    from yolo_sm.core import bench

    spec = bench.BenchSpec.from_mapping(
        {
            "family": "yolov8",
            "widths": [0.25],
            "batches": [2],
            "engines": ["cudagraph/fp16/nhwc", "compile/fp16/nhwc", "cudagraph/fp8/nhwc"],
            "pipeline_engine": "cudagraph/fp16/nhwc",
            "pipeline_streams": [1, 3],
            "pipeline_modes": ["full", "graph"],
            "seconds": 0.5,
            "budget_ms": 50,
            "device": "cuda",
        }
    )
    df = bench.run_bench(spec, tmp_path / "b.parquet", progress=False).set_index("variant")
    assert list(df.index) == spec.variants()
    for v in ("eager/fp16/nhwc", "cudagraph/fp16/nhwc", "compile/fp16/nhwc", "ultralytics_predict"):
        assert df.status[v] == "ok", (v, df.message[v])
    assert df.capture_s["cudagraph/fp16/nhwc"] > 0 and df.compile_s["compile/fp16/nhwc"] > 0
    assert df.build_s["compile/fp16/nhwc"] >= df.compile_s["compile/fp16/nhwc"]
    assert 0 < df.compile_first_s["compile/fp16/nhwc"] <= df.compile_s["compile/fp16/nhwc"]
    # fp8 either runs or says in one line why not; the bench goes on either way
    assert df.status["cudagraph/fp8/nhwc"] == "ok" or df.message["cudagraph/fp8/nhwc"]
    pipe = df[df.index.str.startswith("pipeline/cudagraph/fp16/nhwc/")]
    assert (pipe.status == "ok").all() and sorted(pipe.streams) == [1, 1, 3, 3]
    # graph rows: their engine's forward timed as their graph runs it, captured in a CUDA
    # graph; for a CUDA-graph engine that is its own replay again, give or take
    own = pipe.groupby("pipeline_mode").model_only_img_per_s.agg(["min", "max"])
    assert own.loc["full", "min"] == own.loc["full", "max"]  # one timing for the engine
    assert 0.5 < own.loc["graph", "min"] / own.loc["full", "min"] < 2
    assert pipe.pinned.astype(bool).all()  # frames pinned once, as a camera ring buffer's
    assert ((pipe.pipeline_vs_model_only > 0) & (pipe.pipeline_vs_model_only < 1.5)).all()
    assert (pipe.p99_ms >= pipe.median_ms).all()
    assert df.prov_gpu_name.notna().all() and df.prov_driver.notna().all()


def test_the_default_bench_command_ranks_a_pipeline_near_the_fastest_engine(tmp_path, capsys):
    """`yolo-sm bench --models yolov8:0.5 --batches 16,64 --out b.parquet` as a user types it
    (default candidates and seconds): every path runs, the ranking and one deploy line per
    batch are printed, and the fastest frames-to-boxes path reaches 0.85x the fastest
    model-only engine at both batches."""
    import pandas as pd

    from yolo_sm.cli.main import main

    out = tmp_path / "b.parquet"
    argv = ["bench", "--models", "yolov8:0.5", "--batches", "16,64"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    print(printed)
    df = pd.read_parquet(out)
    bad = df[df.status != "ok"]
    assert bad.empty, bad[["batch", "variant", "message"]].to_string()
    assert df.warmup_settled.dropna().astype(bool).any()  # GPU rows say how the warm-up ended
    assert len([ln for ln in printed.splitlines() if ": deploy pipeline/" in ln]) == 2
    for batch, u in df.groupby("batch"):
        pipe = u[u.variant.str.startswith("pipeline/")].img_per_s.max()
        best = u[u.scope == "model_only"].img_per_s.max()
        assert pipe >= 0.85 * best, (batch, pipe, best)


RAMP_PROBE = """
import json, time
import torch
from yolo_sm.core.bench import bench_model
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.timing import engine_call, measure_engine

model = bench_model("yolov8", 0.5)
eng = build_engine(model, EngineConfig(backend="eager", precision="fp16", layout="nhwc",
                                       batch=16, imgsz=640, device="cuda"))
torch.cuda.synchronize()
time.sleep(5)  # the GPU goes back to idle
first = measure_engine(eng, warmup_ms=50, budget_ms=300)  # the bench's defaults
call, t0 = engine_call(eng), time.perf_counter()
while time.perf_counter() - t0 < 5:  # five seconds of work, as other engines would run
    call()
torch.cuda.synchronize()
later = measure_engine(eng, warmup_ms=50, budget_ms=300)
print(json.dumps({"first_ms": first.median_ms, "later_ms": later.median_ms,
                  "first_settled": first.warmup_settled, "first_warmup_s": first.warmup_s,
                  "clocks": [first.provenance["sm_clock_start_mhz"],
                             later.provenance["sm_clock_start_mhz"]],
                  # the launching thread's CPU ms per call: near the call's ms, the host set it
                  "host_cpu_ms": [first.cpu_ms_per_call, later.cpu_ms_per_call],
                  "first_samples_ms": [first.samples_ms[0], first.samples_ms[-1]]}))
"""


def test_the_first_engine_timed_in_a_fresh_process_reads_what_it_reads_later():
    """The eager fp16 engine (YOLOv8 width 0.5, batch 16) timed first in a fresh process,
    after the GPU idled, and again after five seconds of work: within 5 %."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", RAMP_PROBE], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    print(got)
    assert abs(got["first_ms"] / got["later_ms"] - 1) <= 0.05, got


def test_two_engines_are_timed_in_interleaved_rounds_with_the_clock_of_each():
    """Eager and CUDA-graph fp16 of one unit: ROUNDS rounds each, every round's SM clock read
    (NVML), the row's clock their median, and the eager-over-graph ratio sane."""
    from yolo_sm.core import bench

    spec = bench.BenchSpec.from_mapping(
        {"family": "yolov8", "widths": [0.25], "batches": [8], "engines": ["cudagraph/fp16/nhwc"],
         "pipeline_engine": "cudagraph/fp16/nhwc", "pipeline_streams": [1], "seconds": 0.2,
         "budget_ms": 100, "predict": False, "device": "cuda"}
    )  # fmt: skip
    df = bench.run_bench(spec, progress=False).set_index("variant")
    eng = df[df.scope == "model_only"]
    assert (eng.status == "ok").all(), eng.message.to_dict()
    assert (eng.rounds == bench.ROUNDS).all()
    for r in eng.itertuples():
        assert len(r.round_sm_clock_mhz) == bench.ROUNDS
        assert all(c > 0 for c in r.round_sm_clock_mhz), r.round_sm_clock_mhz
        assert min(r.round_sm_clock_mhz) <= r.sm_clock_mhz <= max(r.round_sm_clock_mhz)
    assert (eng.peak_mem_bytes > 0).all()
    # each engine's time covers its forward's GPU work (a profiler pass's kernel time), a bound
    # the host's speed does not move (eager at batch 8 is paced by the host's launches)
    assert (eng.gpu_busy_ms <= 1.1 * eng.median_ms).all(), eng[["median_ms", "gpu_busy_ms"]]
    assert eng.median_ms["cudagraph/fp16/nhwc"] < 1.5 * eng.median_ms["eager/fp16/nhwc"]

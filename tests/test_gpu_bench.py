"""The side-by-side bench on a GPU (marker ``gpu``; ``pytest -m gpu`` on a CUDA machine): a
tiny plan-shaped run checks what the CPU tests cannot - CUDA graph and torch.compile build
times, the CUDA pipeline at 1 and 3 streams (also in one CUDA graph per batch) against its
engine, YOLO.predict on the GPU."""

import pytest

pytestmark = pytest.mark.gpu


def test_tiny_bench_on_the_gpu(tmp_path):
    from yolo_sm.collect import bench

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

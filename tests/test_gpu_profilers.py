"""GPU tests for the profilers and the pipeline (marker ``gpu``; run on a GPU machine with
``pytest -m gpu``). They check what the CPU tests cannot: real kernels, real counters."""

import gzip

import numpy as np
import pytest
import torch  # noqa: F401 - GPU tests need torch

from yolo_sm.contract.errors import NotAvailableError
from yolo_sm.core.environment import find_ncu

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def model():
    from yolo_sm.core.models import build_yolo

    return build_yolo("yolov8", 0.25)


@pytest.fixture(scope="module")
def bench_setting():
    """The bench's pipeline setting: YOLOv8 w0.5 with the class prior (engines copy it) and a
    batch of 16 1080x810 frames, the bus photo and its mirror image alternating (``a``), with
    its upside-down twin (``b``: other boxes)."""
    import cv2

    from yolo_sm.core.images import bundled_images
    from yolo_sm.core.models import build_yolo
    from yolo_sm.core.pipeline import set_class_prior

    model = build_yolo("yolov8", 0.5)
    set_class_prior(model, 0.001, spread=1.5)
    bus = cv2.imread(str(bundled_images()[0]))
    flipped = np.ascontiguousarray(bus[:, ::-1])
    a = np.stack([bus, flipped] * 8)
    return model, a, np.ascontiguousarray(a[:, ::-1])


def test_kineto_trace_attributes_every_eager_kernel_to_a_layer(model, tmp_path):
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.profiling import kineto

    eng = build_engine(model, EngineConfig(precision="fp16", layout="nhwc", batch=8))
    x = eng.make_input(0)
    path = kineto.capture(lambda: eng(x), tmp_path / "t.json.gz", model=eng.module, iters=2)
    df = kineto.load_kernels(path)
    fwd = df[df.iteration.notna()]
    assert len(fwd) > 100 and set(fwd.iteration) == {0, 1}
    assert (fwd.layer != "").all(), fwd[fwd.layer == ""].kernel_name.head().tolist()
    assert set(fwd.stage) == {"backbone", "neck", "head"}
    other = fwd[fwd.kernel_class == "other"].duration_us.sum() / fwd.duration_us.sum()
    assert other < 0.05
    # Kineto's estimate is the calculator capped by the grid: never above our theoretical value
    both = fwd.dropna(subset=["est_occupancy_pct", "theoretical_occupancy_pct"])
    assert (both.est_occupancy_pct <= both.theoretical_occupancy_pct + 1.0).mean() > 0.95


def test_a_trace_step_on_the_gpu_writes_kernel_rows_model_by_model(tmp_path):
    """A plan's trace step on the GPU: a run of one model traces its configs only (kernel rows
    attributed to layers, with their seconds and the GPU's name), the plan of two models adds
    the other model and keeps the first one's rows as they were."""
    import pandas as pd
    import yaml

    from yolo_sm.contract.plans import load_plan
    from yolo_sm.core import plans

    params = {"widths": [0.25, 0.5], "precisions": "fp16", "layouts": "nhwc", "batches": [1, 2],
              "imgsz": 320, "iters": 1}  # fmt: skip
    step = {"name": "tr", "kind": "trace", "out": "tr.parquet", "est_s": 30, "params": params}
    first_model = {**step, "params": {**params, "widths": [0.25]}}
    for name, s in (("p1", first_model), ("p", step)):
        (tmp_path / f"{name}.yaml").write_text(
            yaml.safe_dump({"name": "t", "device": "cuda", "steps": [s]})
        )
    plan, out = load_plan(tmp_path / "p.yaml"), tmp_path / "d"
    plans.run_plan(load_plan(tmp_path / "p1.yaml"), out, progress=False)
    assert plans.status(plan, out).todo.tolist() == ["2 of 4 configs"]
    first = pd.read_parquet(out / "tr.parquet")
    assert set(first.config) == {"yolov8_w0.25_fp16_nhwc_b1", "yolov8_w0.25_fp16_nhwc_b2"}
    assert (first.layer != "").mean() > 0.9 and first.unit_s.gt(0).all()
    assert first.prov_gpu_name.str.len().gt(0).all()
    assert plans.run_plan(plan, out, progress=False).state.tolist() == ["done"]
    whole = pd.read_parquet(out / "tr.parquet")
    assert whole.config.nunique() == 4 and len(list((out / "traces").glob("tr-*"))) >= 4
    kept = whole[whole.config.isin(first.config)].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept[first.columns], first, check_dtype=False)


def test_kineto_on_a_cuda_graph_keeps_iterations_not_layers(model, tmp_path):
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.profiling import kineto

    eng = build_engine(model, EngineConfig(backend="cudagraph", precision="fp16", batch=8))
    x = eng._input
    path = kineto.capture(lambda: eng(x), tmp_path / "g.json.gz", iters=2)
    df = kineto.load_kernels(path)
    assert len(df) > 100 and (df.layer == "").all()


@pytest.mark.skipif(find_ncu() is None, reason="Nsight Compute not installed")
def test_ncu_rows_join_per_layer(tmp_path):
    from yolo_sm.core.profiling import ncu
    from yolo_sm.core.profiling.target import target_argv

    argv = target_argv("yolov8", "0.25", "fp16", "nhwc", "1", 640, "cuda")
    df = ncu.profile(argv, tmp_path / "n.csv", metric_set="occupancy", timeout_s=300)
    assert (
        len(df) > 100 and (df.layer != "").all() and set(df.config) == {"yolov8_w0.25_fp16_nhwc_b1"}
    )
    assert df.theoretical_occupancy_pct.notna().all() and df.achieved_occupancy_pct.notna().all()
    rep = ncu.report_path(tmp_path / "n.csv")
    packed = rep.with_name(rep.name + ".gz")  # kept gzipped beside the CSV, for the GUI
    assert packed.exists() and not rep.exists()
    rep.write_bytes(gzip.decompress(packed.read_bytes()))
    try:
        again = ncu.load_ncu(rep)  # through Nsight Compute's ncu_report module
    except NotAvailableError:
        pass  # the module is not installed here
    else:
        assert len(again) == len(df) and again.nvtx_path.tolist() == df.nvtx_path.tolist()
        assert np.allclose(again.duration_us, df.duration_us)
    from yolo_sm.analyse.occupancy import theoretical_occupancy

    for r in df.drop_duplicates(["kernel_name", "block_size", "registers_per_thread"]).itertuples():
        ours = theoretical_occupancy(
            "9.0", int(r.block_size), int(r.registers_per_thread), int(r.shared_mem_per_block_bytes)
        )
        assert abs(ours.occupancy_pct - r.theoretical_occupancy_pct) < 0.01, r.kernel_name


def test_pipeline_on_gpu_agrees_with_ultralytics_and_overlaps(model):
    import copy

    import cv2

    from tests.fixtures.ultralytics_oracle import ultralytics_predict
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.images import bundled_images
    from yolo_sm.core.pipeline import (
        DetectionPipeline,
        PipelineConfig,
        match_boxes,
        measure_pipeline,
        set_class_prior,
    )

    model = copy.deepcopy(model)
    set_class_prior(model, 0.001, spread=1.5)
    bus = cv2.imread(str(bundled_images()[0]))
    frames = [bus, np.ascontiguousarray(bus[:, ::-1])]
    eng = build_engine(model, EngineConfig(precision="fp16", layout="nhwc", batch=2))
    pipe = DetectionPipeline(model, eng, PipelineConfig(streams=2))
    ours = pipe(np.stack(frames))
    ref = ultralytics_predict(model, frames, 2, "cuda", True)
    for o, r in zip(ours, ref, strict=True):
        assert match_boxes(o, r) >= 0.7, (len(o), len(r))
    stats = measure_pipeline(pipe, frames, batch=2, seconds=1.0)
    assert stats["frames_per_s"] > 50


@pytest.mark.parametrize("backend,graph", [("cudagraph", False), ("copyfree", True)])
def test_pipeline_three_streams_pinned_overlap_and_match_one_stream(bench_setting, backend, graph):
    """The bench's pipeline setting (YOLOv8 w0.5, fp16 NHWC, batch 16, 1080x810 frames): with 3
    batches in flight and pinned frames the pipeline delivers at least the 1-stream frames/s,
    and its boxes equal the 1-stream run's batch for batch. Two different batches alternate, as
    pinned tensors and as numpy arrays (staged through the slots' pinned buffers): a race on
    the CUDA graph's static output, on a slot's buffer, on a freed input or (``graph``: one
    CUDA graph per slot, the copy-free engine captured in each) on the engine's own buffers
    would hand one batch's boxes to another."""
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.pipeline import DetectionPipeline, PipelineConfig, measure_pipeline

    model, a, b = bench_setting
    batch = len(a)
    eng = build_engine(
        model, EngineConfig(backend=backend, precision="fp16", layout="nhwc", batch=batch)
    )
    try:
        pa, pb = torch.from_numpy(a).pin_memory(), torch.from_numpy(b).pin_memory()
        seq = [pa, b, a, pb, pa, b, pb, a]
        same_as = [0, 1, 0, 1, 0, 1, 1, 0]  # which of the two batches each one is
        mode = {"nms_topk": 1024, "graph": True} if graph else {}
        one_pipe = DetectionPipeline(model, eng, PipelineConfig(streams=1, **mode))
        three_pipe = DetectionPipeline(model, eng, PipelineConfig(streams=3, **mode))
        one = [r for _, r in one_pipe.run(seq)]
        three = [r for _, r in three_pipe.run(seq)]
        assert len(one) == len(three) == len(seq)

        def equal(r, s):
            return all(np.array_equal(x, y) for x, y in zip(r, s, strict=True))

        assert all(len(d) > 0 for d in one[0]) and not equal(one[0], one[1])

        # 1 stream against itself first: a mismatch there is non-determinism, not a race
        for i, k in enumerate(same_as):
            assert equal(one[i], one[k]), f"1 stream: batch {i} differs from batch {k}"
        for i in range(len(seq)):
            assert equal(three[i], one[i]), f"3 streams: batch {i} differs from 1 stream"

        frames = [a[0], a[1]]  # the bus photo and its mirror image
        s1 = measure_pipeline(one_pipe, frames, batch, seconds=1.5)
        s3 = measure_pipeline(three_pipe, frames, batch, seconds=1.5)
        print(f"\n1 stream: {s1}\n3 streams: {s3}")
        assert s1["pinned"] is True and s3["pinned"] is True
        assert s1["streams"] == 1 and s3["streams"] == 3
        assert s3["frames_per_s"] >= s1["frames_per_s"], (s1, s3)
    finally:
        eng.close()


def test_topk_nms_on_the_gpu_gives_the_full_nms_boxes(bench_setting):
    """The fixed-size NMS (each frame's 1,024 best candidates, no host sync before the copy of
    the boxes) in the bench's pipeline setting (CUDA graph fp16 NHWC, batch 16 of 1080x810
    frames: ~2,500 candidates per bus frame) returns the full NMS's boxes, batch for batch,
    with 3 batches in flight, and so does the whole batch in one CUDA graph per slot (the
    engine's own forward captured in it); the test says whether the fixed-size NMS was exact
    or handed batches to the full NMS, and prints the three modes' frames/s."""
    from yolo_sm.core import pipeline
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.pipeline import (
        DetectionPipeline,
        PipelineConfig,
        match_boxes,
        measure_pipeline,
    )

    model, a, b = bench_setting
    seq = [a, b, a]
    eng = build_engine(
        model, EngineConfig(backend="cudagraph", precision="fp16", layout="nhwc", batch=16)
    )
    try:
        full = [r for _, r in DetectionPipeline(model, eng, PipelineConfig(streams=1)).run(seq)]
        calls = []
        real = pipeline.batch_nms
        pipeline.batch_nms = lambda *a, **k: calls.append(1) or real(*a, **k)
        try:
            topk = DetectionPipeline(model, eng, PipelineConfig(streams=3, nms_topk=1024))
            ours = [r for _, r in topk.run(seq)]
        finally:
            pipeline.batch_nms = real
        print(f"\ntop-k NMS deferred {len(calls)} of {len(seq)} batches to the full NMS")
        graphed = DetectionPipeline(
            model, eng, PipelineConfig(streams=3, nms_topk=1024, graph=True)
        )
        in_graph = [r for _, r in graphed.run(seq + [b])]
        assert all(len(d) > 0 for d in full[0])
        for i, (o, g, f) in enumerate(zip(ours, in_graph, full, strict=False)):
            assert all(np.array_equal(x, y) for x, y in zip(o, f, strict=True)), f"batch {i}"
            # the graph's letterbox and decode are compiled: other kernels, the same boxes up
            # to rounding at the letterbox's resampling
            for x, y in zip(g, f, strict=True):
                assert abs(len(x) - len(y)) <= 0.02 * len(y), (i, len(x), len(y))
                assert match_boxes(x, y) >= 0.97 and match_boxes(y, x) >= 0.97, i
        # the slots' buffers are reused: the fourth batch (slot 0 again) is b's, not a's
        assert all(np.array_equal(x, y) for x, y in zip(in_graph[3], in_graph[1], strict=True))
        frames = [a[0], a[1]]
        rates = {
            name: measure_pipeline(p, frames, len(a), seconds=1.0)["frames_per_s"]
            for name, p in (("full", DetectionPipeline(model, eng, PipelineConfig(streams=3))),
                            ("topk", topk), ("graph", graphed))
        }  # fmt: skip
        print("frames/s, 3 streams:", {k: round(v) for k, v in rates.items()})
    finally:
        eng.close()


def test_pipeline_around_a_compiled_engine_matches_its_cuda_graph_twin(bench_setting):
    """The pipeline around torch.compile's default-mode engine (the bench_pipeline step's
    setting, YOLOv8 w0.5 fp16 NHWC, batch 16): with 3 batches in flight its boxes equal its own
    1-stream run's batch for batch (inductor's kernels run on the stream current at the call,
    the compute stream), and they match the CUDA-graph engine's pipeline on the same frames
    (the same weights, other kernels: at least 90 % of its boxes have a twin at IoU 0.9)."""
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.pipeline import DetectionPipeline, PipelineConfig, match_boxes

    model, a, b = bench_setting
    batch = len(a)
    seq = [a, b, a, b, b, a]

    def boxes(backend, streams):
        eng = build_engine(
            model,
            EngineConfig(backend=backend, precision="fp16", layout="nhwc", batch=batch),
        )
        try:  # one engine for every stream count: its builds may pick other cuDNN kernels
            return [
                [r for _, r in DetectionPipeline(model, eng, PipelineConfig(streams=s)).run(seq)]
                for s in streams
            ]
        finally:
            eng.close()

    one, three = boxes("compile", (1, 3))
    (graph,) = boxes("cudagraph", (1,))
    assert all(len(d) > 0 for d in one[0])
    for i in range(len(seq)):
        assert all(np.array_equal(x, y) for x, y in zip(three[i], one[i], strict=True)), (
            f"3 streams: batch {i} differs from 1 stream"
        )
        for x, y in zip(one[i], graph[i], strict=True):
            assert match_boxes(x, y) >= 0.9, (i, len(x), len(y))


def test_ceilings_on_the_gpu(tmp_path):
    import time

    from yolo_sm.contract.store import write_atomic
    from yolo_sm.topics.roofline.collect import measure_ceilings

    try:
        import cudnn  # noqa: F401 - the cuDNN frontend adds the cuDNN int8 ceiling
    except ImportError:
        has_cudnn = False
    else:
        has_cudnn = True
    t0 = time.monotonic()
    raw = measure_ceilings("cuda", n=4096, copy_bytes=1 << 26, budget_ms=100)
    write_atomic(raw, tmp_path / "ceilings.parquet", {})  # every column converts to Arrow
    assert set(raw.regime) == {"burst", "sustained"}
    for _, part in raw.groupby("regime"):
        df = part.set_index("ceiling")
        assert {
            "matmul_fp32",
            "matmul_fp16",
            "matmul_bf16",
            "copy_d2d",
            "copy_h2d_frame_fp16",
        } <= set(df.index)
        assert df.value["matmul_fp16"] > 2 * df.value["matmul_fp32"]  # tensor cores vs FFMA
        assert df.value["copy_d2d"] > df.value.get("copy_h2d_pinned", 0)
        assert 0 < df.value["copy_h2d_frame_fp16"] < 5  # ms
        if "matmul_int8" in df.index:
            assert df.unit["matmul_int8"] == "TOP/s" and df.value["matmul_int8"] > 0
            # the int8 ceiling is the faster of cuBLASLt's GEMM and, where the cuDNN frontend
            # is installed, cuDNN's 1x1 convolution
            names = ["matmul_int8_n4096"] + ["matmul_int8_cudnn_n4096"] * has_cudnn
            assert ("matmul_int8_cudnn_n4096" in df.index) == has_cudnn
            impls = df.loc[names]
            assert df.value["matmul_int8"] == impls.value.max()
            assert df.kernel["matmul_int8"] == impls.kernel[impls.value.idxmax()]
            kernels = ["torch._int_mm (cuBLASLt)", "cuDNN int8 1x1 convolution"][: len(names)]
            assert list(impls.kernel) == kernels
    mm = raw[raw.ceiling.str.startswith("matmul")]
    assert (mm.fill == "randn").all() and (mm.sm_clock_end_mhz > 0).all()  # NVML's SM clock
    assert (
        mm.kernel.notna().all() and raw[~raw.ceiling.str.startswith("matmul")].kernel.isna().all()
    )
    assert (raw.nvml_samples >= 1).all() and (raw.sm_clock_mean_mhz > 0).all()
    assert (raw.power_mean_w > 0).all() and (raw.power_limit_w > 0).all()
    # the copies move bytes, not matmul operands: they carry no fill
    assert raw[~raw.ceiling.str.startswith("matmul")].fill.isna().all()
    z = measure_ceilings(
        "cuda", n=4096, copy_bytes=1 << 26, budget_ms=30, precisions=("fp16",), fill="zeros"
    )
    zm = z[z.ceiling.str.startswith("matmul")]
    assert zm.fill.tolist() == ["zeros"] * 2 and (zm.value > 0).all()
    assert z[~z.ceiling.str.startswith("matmul")].fill.isna().all()
    assert time.monotonic() - t0 < 60


def test_ceilings_plan_step_is_short_and_its_burst_holds_over_sustained(tmp_path):
    """The shipped plan's ceilings step in under a minute; the burst figure of every matmul is
    not below its sustained one by more than noise."""
    import time

    from yolo_sm.topics.roofline.collect import measure_ceilings

    t0 = time.monotonic()
    df = measure_ceilings("cuda", n=(4096, 8192, 16384), copy_bytes=1 << 30, budget_ms=800)
    assert time.monotonic() - t0 < 60
    v = df.pivot_table(index="ceiling", columns="regime", values="value")
    mm = v[v.index.str.startswith("matmul_") & ~v.index.str.contains("_n")]
    assert (mm.burst >= 0.97 * mm.sustained).all(), mm


def _clustered_boxes(seed: int, g: int, w: int, spread: float):
    """(g, w, 4) xyxy boxes of 40-50 px around one centre per group (``spread`` px apart), and
    a validity mask with ~5 % padding: many pairs near an IoU threshold."""
    gen = torch.Generator().manual_seed(seed)
    centre = torch.rand(g, 1, 2, generator=gen) * 300 + torch.randn(g, w, 2, generator=gen) * spread
    size = torch.rand(g, w, 2, generator=gen) * 10 + 40
    return torch.cat((centre, centre + size), -1), torch.rand(g, w, generator=gen) > 0.05, gen


def test_the_walk_kernel_on_the_gpu_reaches_greedy_nms():
    """nms_matrix's walk (overlap bits, then one serial walk per group) compiled for this GPU
    keeps what the torch fixed point keeps on the CPU, on a real-sized problem (16 groups of
    2,000 clustered candidates) and on a 3,000-box suppression chain."""
    from yolo_sm.core import nms

    bx, valid, _ = _clustered_boxes(1, 16, 2000, spread=30)
    ref = nms.suppress_fixpoint(nms.overlap_matrix(bx, None, valid, 0.7), valid)
    out, settled = nms.greedy_keep(bx.cuda(), None, valid.cuda(), 0.7)
    assert nms._triton_walk() is not None, "the kernel did not run"
    assert 0.01 < ref.float().mean() < 0.9 and bool(settled.all())
    assert torch.equal(out.cpu(), ref)
    n = 3000  # each box overlaps the next only: every other box is kept
    x = torch.arange(n, dtype=torch.float32)[:, None] * 2.0
    chain = torch.cat((x, torch.zeros_like(x), x + 10, torch.full_like(x, 10)), 1)[None]
    keep, _ = nms.greedy_keep(chain.cuda(), None, torch.ones(1, n, dtype=torch.bool).cuda(), 0.5)
    assert keep.cpu()[0].tolist() == [i % 2 == 0 for i in range(n)]


def test_the_pipeline_probe_times_every_stage_on_the_gpu():
    """The probe on the GPU (YOLOv8 w0.25, batch 4 of the bus photo): every stage is a row,
    the GPU-only ones included, with positive times."""
    from yolo_sm.topics.deploy.collect_probe import STAGES, probe_pipeline

    t = probe_pipeline(width=0.25, batch=4, reps=5, frames="bus").set_index("stage")
    assert t.index.tolist() == list(STAGES)
    assert (t.wall_ms > 0).all()
    alone = t.index[~t.index.str.startswith("batch")]
    assert (t.loc[alone, "gpu_ms"] > 0).all()
    print("\n", t[["wall_ms", "gpu_ms"]].round(3).to_string())

"""GPU tests of the shapes collectors (marker ``gpu``): one FLOPs-matched pair point with its
Kineto occupancy pass, and a non-square CUDA graph engine against eager fp32."""

import math

import pytest
import torch

pytestmark = pytest.mark.gpu


def test_a_pair_point_records_launches_and_occupancy(tmp_path):
    from yolo_sm.contract.schema import problems
    from yolo_sm.topics.wide_deep.collect import WideDeepSpec, run_wide_vs_deep

    spec = WideDeepSpec(
        pairs=(((0.25, 0.33), (0.19, 0.67)),), backends=("eager", "cudagraph"), batches=(4,),
        imgsz=320, warmup_ms=10, budget_ms=30, tolerance=0.1,
    )  # fmt: skip
    df = run_wide_vs_deep(spec, tmp_path / "w.parquet", progress=False)
    assert problems(df, "wide_vs_deep") == []
    assert (df.status == "ok").all(), df.message.tolist()
    eager = df[df.backend == "eager"].set_index("role")
    graph = df[df.backend == "cudagraph"].set_index("role")
    # the deeper model runs more kernels; a graph replay is one launch
    assert eager.kineto_kernels_per_forward["deep"] > eager.kineto_kernels_per_forward["wide"]
    assert (graph.launches_per_forward <= 2).all()
    assert (df.kineto_kernels_per_forward > 20).all()
    occ = df.est_occupancy_tw_pct
    assert occ.notna().all() and ((occ > 0) & (occ <= 100)).all(), occ.tolist()
    assert not math.isnan(df.kineto_kernel_us.iloc[0])


def test_a_non_square_cuda_graph_engine_agrees_with_fp32():
    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.models import build_yolo
    from yolo_sm.core.timing import measure_engine
    from yolo_sm.topics.resolutions.collect import ResolutionSpec, run_resolutions

    model = build_yolo("yolov8", 0.25)
    cfg = EngineConfig(backend="cudagraph", precision="fp16", layout="nhwc", batch=2,
                       imgsz_hw=(736, 1280), device="cuda")  # fmt: skip
    eng = build_engine(model, cfg)
    assert eng.rel_err is not None and eng.rel_err <= cfg.tolerance
    x = eng.make_input(1)
    assert tuple(x.shape) == (2, 3, 736, 1280)
    out = eng(x)
    assert out.shape[-1] == (92 * 160 + 46 * 80 + 23 * 40) and torch.isfinite(out.float()).all()
    m = measure_engine(eng, warmup_ms=10, budget_ms=30)
    assert m.median_ms > 0
    eng.close()
    df = run_resolutions(
        ResolutionSpec(widths=(0.25,), frames=("640x640", "1280x720"), batch=2, warmup_ms=10,
                       budget_ms=30),
        None,
        progress=False,
    )  # fmt: skip
    assert (df.status == "ok").all(), df.message.tolist()
    assert set(df.backend) == {"cudagraph", "eager"} and len(df) == 4

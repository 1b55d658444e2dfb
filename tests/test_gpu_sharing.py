"""GPU test of the sharing collector (marker ``gpu``): two small CUDA-graph engines alone and
on two streams for 0.5 s each, with the GPM sampler (board power) and the short traces."""

import pytest

pytestmark = pytest.mark.gpu


def test_a_short_together_run_gives_rates_kernels_and_a_timeline():
    import torch  # noqa: F401 - GPU tests need torch

    from yolo_sm.topics.sharing.collect import run_sharing

    out = run_sharing(
        ["0.25x4+0.25x1"], "cuda", imgsz=320, seconds=0.5, gap_s=0.1, processes=False, trace_s=0.1
    )
    t = out["sharing"]
    assert list(t["mode"]) == ["alone_a", "alone_b", "streams", "streams"]
    assert (t.img_per_s > 0).all() and (t.batches > 10).all(), t
    assert (t.p99_ms >= t.p50_ms).all() and (t.p50_ms > 0).all()
    assert set(t.backend) == {"cudagraph"} and not t.mps_used.any() and not t.mig_used.any()
    k = out["kernels"]
    together = k[k["mode"] == "streams"]
    assert set(together.engine) == {"a", "b"}, k  # every replay's kernels found their engine
    assert (k.batches > 0).all() and (k.time_us > 0).all()
    assert "tensor_core_conv" in set(k.kernel_class)
    assert (k[k["mode"] != "streams"].overlap_us == 0).all()
    g = out["gpm"]
    run = g[(g.phase == "run") & (g.metric == "sm_util_pct")]
    assert len(run) >= 3 and set(run["mode"]) == {"alone_a", "alone_b", "streams"}
    assert (g[g.metric == "power_w"].value > 0).any()

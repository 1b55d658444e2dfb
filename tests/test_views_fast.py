"""Notebook 08's views on the synthetic bench fixture (tests/fixtures/synthetic_bench.py): the
side-by-side tables, the goals of the fast-engines issue (each flips when its number crosses
the threshold), jitter and 8-bit speed-ups, figures and findings."""

import numpy as np
import pandas as pd
import pytest

from tests.fixtures.synthetic_bench import make_bench
from yolo_sm.analyse import fast
from yolo_sm.contract.errors import UserError
from yolo_sm.report import fast_plots

PEAK = 790.0


@pytest.fixture
def df():
    return make_bench()


def _set_speed(df, variant, width, batch, ratio, over="eager/fp16/nhwc"):
    """Make ``variant`` at (width, batch) ``ratio`` times as fast as ``over`` (img/s and the
    latency that goes with it)."""
    at = (df.width == width) & (df.batch == batch)
    ref = df.loc[at & (df.variant == over), "img_per_s"].item()
    base = df.loc[at & (df.variant == "eager/fp16/nhwc"), "img_per_s"].item()
    row = at & (df.variant == variant)
    assert row.sum() == 1
    df.loc[row, "img_per_s"] = ratio * ref
    df.loc[row, "median_ms"] = batch * 1e3 / (ratio * ref)
    df.loc[row, "vs_baseline"] = ratio * ref / base
    return df


def _status(df, **kw):
    return (
        fast.goal_summary(fast.goal_checks(df, kw.pop("peak", PEAK), **kw)).set_index("goal").status
    )


def test_side_by_side_tables(df):
    t = fast.side_by_side(df)
    assert len(t) == len(df) == 8 * 3 * 8
    first = t[(t.width == 0.25) & (t.batch == 1)]
    assert first.variant.iloc[0] == "eager/fp16/nhwc" and first.vs_baseline.iloc[0] == 1.0
    wide = fast.side_by_side_wide(t)
    assert wide.shape[0] == 24 and wide.columns[0] == ("eager/fp16/nhwc", "img/s")
    assert (wide[("eager/fp16/nhwc", "x base")] == 1.0).all()
    # the out-of-memory cell is empty, and listed with its reason
    assert pd.isna(wide.loc[(2.0, 64), ("compile:max-autotune/fp16/nhwc", "img/s")])
    bad = fast.failures(df)
    assert len(bad) == 1 and bad.status.item() == "oom" and "out of memory" in bad.message.item()


def test_goals_on_the_fixture(df):
    checks = fast.goal_checks(df, PEAK)
    assert _status(df).to_dict() == {1: fast.MET, 2: fast.MISSED, 3: fast.MET, 4: fast.MET}
    g1 = checks[checks.goal == 1].set_index("width")
    assert g1.loc[1.0, "threshold"] == 0.30 and g1.loc[1.25, "threshold"] == 0.5
    base = df[(df.variant == "eager/fp16/nhwc") & (df.batch == 1) & (df.width == 1.0)]
    best = df[(df.variant == g1.loc[1.0, "variant"]) & (df.batch == 1) & (df.width == 1.0)]
    assert g1.loc[1.0, "value"] == pytest.approx(best.median_ms.item() / base.median_ms.item())
    # goal 2 leaves width 1.25 out and checks 1.5-2.0 twice (ratio and share of the peak)
    g2 = checks[checks.goal == 2]
    assert 1.25 not in set(g2.width) and (g2.width >= 1.5).sum() == 6


def test_goal_1_flips_at_030_of_the_baseline_latency(df):
    quick = [v for v in df.variant.unique() if v.startswith(("cudagraph", "compile"))]
    for ratio, status in ((1 / 0.29, fast.MET), (1 / 0.31, fast.MISSED)):
        d = df.copy()
        for v in quick:  # every engine at width 1.0 batch 1 just under / over 0.30x
            d = _set_speed(d, v, 1.0, 1, ratio if v == fast[0] else 1.0)
        assert _status(d)[1] == status, ratio


def test_goal_2_checks_flip(df):
    v = "compile:max-autotune/fp16/nhwc"
    row = lambda c, w, check: c[(c.goal == 2) & (c.width == w) & (c.check == check)].iloc[0]  # noqa: E731
    assert not row(fast.goal_checks(df, PEAK), 0.75, "img/s / baseline").met
    d = _set_speed(df.copy(), v, 0.75, 64, 1.51)
    assert row(fast.goal_checks(d, PEAK), 0.75, "img/s / baseline").met
    # the share of the fp16 peak: 249 TFLOP/s is under half of 790, over half of 450
    share = row(fast.goal_checks(df, PEAK), 1.5, "TFLOP/s / fp16 peak")
    tfl = df[(df.variant == share.variant) & (df.width == 1.5) & (df.batch == 64)].tflops.item()
    assert not share.met and share.value == pytest.approx(tfl / PEAK) and 245 < tfl < 255
    assert row(fast.goal_checks(df, 450.0), 1.5, "TFLOP/s / fp16 peak").met


def test_goal_3_flips_and_waits_for_8_bit_rows(df):
    d = _set_speed(df.copy(), "cudagraph/fp8/nhwc", 1.5, 64, 1.29, over="cudagraph/fp16/nhwc")
    assert _status(d)[3] == fast.MISSED
    d = _set_speed(df.copy(), "cudagraph/fp8/nhwc", 1.5, 64, 1.31, over="cudagraph/fp16/nhwc")
    assert _status(d)[3] == fast.MET
    d = df.copy()
    fp8 = d.variant == "cudagraph/fp8/nhwc"
    d.loc[fp8, ["status", "message", "img_per_s"]] = ["error", "NotAvailableError: no fp8", None]
    checks = fast.goal_checks(d, PEAK)
    assert _status(d)[3] == fast.PENDING
    assert "NotAvailableError: no fp8" in checks[checks.goal == 3].note.item()
    # fast enough where it ran, but one width's 8-bit engine failed its check: missed there
    d = df.copy()
    for w in sorted(set(d[d.width >= 1.0].width)):
        d = _set_speed(d, "cudagraph/fp8/nhwc", w, 64, 1.5, over="cudagraph/fp16/nhwc")
    assert _status(d)[3] == fast.MET
    widest = d.width.max()
    bad = (d.variant == "cudagraph/fp8/nhwc") & (d.width == widest) & (d.batch == 64)
    d.loc[bad, ["status", "message", "img_per_s"]] = ["error", "NumericalMismatch: 0.103", None]
    checks = fast.goal_checks(d, PEAK)
    row = checks[(checks.goal == 3) & (checks.width == widest)]
    assert row.met.tolist() == [False] and "NumericalMismatch: 0.103" in row.note.item()
    assert _status(d)[3] == fast.MISSED
    # failing the check at every width: missed, not pending
    d = df.copy()
    fp8 = d.variant == "cudagraph/fp8/nhwc"
    d.loc[fp8, ["status", "message", "img_per_s"]] = ["error", "NumericalMismatch: 0.2", None]
    assert _status(d)[3] == fast.MISSED


def test_goal_4_needs_both_checks(df):
    at = (df.width == 0.5) & (df.batch == 16)
    pipe = at & df.variant.str.startswith("pipeline/")
    d = df.copy()
    d.loc[pipe, "pipeline_vs_model_only"] = 0.84  # more than 15 % below the engine alone
    assert _status(d)[4] == fast.MISSED
    d = df.copy()
    fastest = d.loc[pipe, "img_per_s"].max()
    d.loc[at & (d.variant == "ultralytics_predict"), "img_per_s"] = fastest / 5.9
    assert _status(d)[4] == fast.MISSED
    d.loc[at & (d.variant == "ultralytics_predict"), "img_per_s"] = fastest / 6.1
    assert _status(d)[4] == fast.MET
    assert _status(df[~pipe])[4] == fast.PENDING


def test_8_bit_engines_count_for_goals_1_and_2_only_when_asked(df):
    checks = fast.goal_checks(df, PEAK, include_8bit=True)
    assert set(checks[checks.goal.isin([1, 2])].variant) & {"cudagraph/fp8/nhwc"}
    checks = fast.goal_checks(df, PEAK)
    assert "cudagraph/fp8/nhwc" not in set(checks[checks.goal.isin([1, 2])].variant)


def test_eight_bit_speedup_pairs_the_same_backend(df):
    sp = fast.eight_bit_speedup(df)
    assert sp.width.tolist() == [1.0, 1.25, 1.5, 1.75, 2.0]
    assert (sp.fp16_variant == "cudagraph/fp16/nhwc").all()
    ref = df[(df.variant == "cudagraph/fp16/nhwc") & (df.batch == 64) & (df.width == 1.0)]
    assert sp.fp16_img_per_s.iloc[0] == ref.img_per_s.item()
    # an 8-bit engine without an fp16 engine of its backend is not compared with another one
    # (the eager fp16 NHWC baseline is the fp16 engine of eager/fp8/nhwc)
    nchw = df[df.variant == "cudagraph/fp8/nhwc"].assign(variant="cudagraph/fp8/nchw")
    assert len(fast.eight_bit_speedup(pd.concat([df, nchw]))) == len(sp)


def test_jitter_is_p99_minus_p50_against_one_stream(df):
    j = fast.jitter(df)
    assert len(j) == 24 and (j.streams == 3).all()
    s1 = df[(df.variant.str.endswith("/s1")) & (df.width == 0.5) & (df.batch == 16)]
    s3 = df[(df.variant.str.endswith("/s3")) & (df.width == 0.5) & (df.batch == 16)]
    r = j[(j.width == 0.5) & (j.batch == 16)].iloc[0]
    assert r.jitter_1_ms == pytest.approx((s1.p99_ms - s1.median_ms).item())
    assert r.reduction == pytest.approx(
        1 - (s3.p99_ms - s3.median_ms).item() / (s1.p99_ms - s1.median_ms).item()
    )


def test_pipeline_table_and_figures(df):
    pt = fast.pipeline_table(df)
    assert len(pt) == 48 and pt.streams.tolist()[:2] == [1, 3]
    r = pt[(pt.width == 0.5) & (pt.batch == 16) & (pt.streams == 3)].iloc[0]
    pred = df[(df.variant == "ultralytics_predict") & (df.width == 0.5) & (df.batch == 16)]
    assert r.vs_predict == pytest.approx(r.img_per_s / pred.img_per_s.item())
    fig = fast_plots.plot_speedup_vs_width(df)
    names = {t.name for t in fig.data}
    assert names == {v for v in df.variant.unique() if "/" in v and v != "eager/fp16/nhwc"} - {
        v for v in df.variant.unique() if v.startswith("pipeline/")
    }
    assert (
        len(fast_plots.plot_pipeline(pt).data) == 4 * 3
    )  # 2 pipelines, model-only, predict x 3 batches


def test_findings_are_computed_and_say_synthetic(df):
    text = fast_plots.fast_findings(df, fast.goal_checks(df, PEAK), (PEAK, "reference"))
    assert "synthetic test fixture" in text
    assert "**Goal 2 missed**" in text and "**Goal 4 met**" in text
    assert "1 row(s) did not run" in text and "-72%" in text
    d = _set_speed(df.copy(), "cudagraph/fp8/nhwc", 1.5, 64, 1.2, over="cudagraph/fp16/nhwc")
    assert "**Goal 3 missed**" in fast_plots.fast_findings(
        d, fast.goal_checks(d, PEAK), (PEAK, "r")
    )


def test_time_breakdown_of_the_shipped_fp16_and_fp8_traces():
    """Every kernel lands in one part, per forward; the quantiser only in the fp8 engine, and
    the fp8 engine's convolutions carry its bias and SiLU (far fewer separate adds / SiLUs)."""
    from yolo_sm.contract import datasets

    k = datasets.load("h200/trace_fp8_w1_b64")
    b = fast.time_breakdown(k)
    per_fwd = k.groupby("config").duration_us.sum() / k.groupby("config").iteration.nunique() / 1e3
    assert np.allclose(b.loc["total"].sort_index(), per_fwd.sort_index())
    assert np.allclose(b.drop("total").sum(), b.loc["total"])
    fp16, fp8 = "yolov8_w1_fp16_nhwc_b64", "yolov8_w1_fp8_nhwc_b64"
    assert b.loc["fp8 quantisation", fp16] == 0 < b.loc["fp8 quantisation", fp8]
    assert b.loc["SiLU", fp8] < 0.25 * b.loc["SiLU", fp16]
    text = fast_plots.fp8_time_findings(b, fp16, fp8)
    assert f"{b.loc['total', fp8]:.1f} ms (fp8)" in text


def test_compile_breakdown_of_the_shipped_eager_and_compiled_traces():
    """torch.compile's trace: its Triton kernels take the place of eager's separate adds, SiLUs
    and copies, convolutions stay; the findings quote the table's own numbers."""
    from yolo_sm.contract import datasets

    cfg = "yolov8_w1_fp16_nhwc_b64"
    k = fast.compare_backends(
        {
            "eager": datasets.load("h200/trace_fp8_w1_b64"),
            "compile": datasets.load("h200/trace_compile_w1_b64"),
        },
        cfg,
    )
    assert set(k.config) == {"eager", "compile"}
    b = fast.time_breakdown(k)
    assert np.allclose(b.drop("total").sum(), b.loc["total"])
    fused = "fused by torch.compile (Triton)"
    assert b.loc[fused, "eager"] == 0 < b.loc[fused, "compile"]
    assert b.loc["add (bias, residual)", "compile"] < 0.1 * b.loc["add (bias, residual)", "eager"]
    n = fast.kernels_per_forward(k)
    assert n["compile"] < n["eager"]
    text = fast_plots.compile_time_findings(b, n)
    assert f"{b.loc['total', 'compile']:.1f} ms" in text and f"{n['eager']:.0f} eager" in text
    with pytest.raises(UserError, match="no kernels of config"):
        fast.compare_backends({"eager": k}, "yolov8_w9_fp16_nhwc_b1")


def test_units_say_when_each_ran_and_which_pipeline(df):
    from yolo_sm.contract import datasets

    b = datasets.load("h200/bench_fast_engines")
    u = fast.units(b).set_index(["width", "batch"])
    groups = b.groupby(["width", "batch"])
    assert len(u) == groups.ngroups
    assert (u.variants == groups.variant.nunique()).all()
    assert (u.measured_utc == groups.prov_date_utc.min()).all()
    pipe = b[b.variant.str.startswith("pipeline/")].groupby(["width", "batch"])
    assert (u.pipeline_nms == pipe.nms.first()).all()
    s = fast.units(df)  # a table without the pipeline-version columns: empty, not an error
    assert len(s) == df.groupby(["width", "batch"]).ngroups and s.pipeline_nms.isna().all()


def test_pipeline_stages_and_findings_from_a_cpu_probe():
    """The probe's view on a real (CPU) probe: shares of the 1-stream batch, the findings quote
    the table's own figures; with GPU-event times (as on the H200, here the wall times shifted)
    the host-time line appears; boxes that differ are said to differ."""
    from yolo_sm.collect.probe import STAGES, probe_pipeline

    probe, state = probe_pipeline(
        width=0.125, batch=2, reps=2, device="cpu", imgsz=160, frames="bus", keep_state=True
    )
    assert state["decoded"].shape[0] == 2 and tuple(state["frames"].shape[1:3]) == (1080, 810)
    state["engine"].close()
    t = fast.pipeline_stages(probe)
    assert t.stage.tolist() == list(STAGES)
    one = t.set_index("stage").loc["batch, 1 stream", "share_of_1_stream_batch"]
    assert one == pytest.approx(1.0)
    text = fast_plots.probe_findings(probe)
    eng = probe.set_index("stage").wall_ms["engine"]
    assert f"the engine takes {eng:.2f} ms" in text and "same result." in text
    assert "None" not in text and "nan" not in text
    assert "GPU-event time" not in text  # a CPU probe has no CUDA events
    gpu = probe.assign(gpu_ms=probe.wall_ms * 0.5)
    gpu.loc[gpu.stage == "postprocess: fixpoint in torch ops", "same_result"] = False
    text = fast_plots.probe_findings(gpu)
    assert "GPU-event time" in text and "a different result." in text
    gpu.loc[gpu.stage == "postprocess: fixpoint in torch ops", "same_result"] = None
    assert "torch ops: " in fast_plots.probe_findings(gpu) and "row)." in fast_plots.probe_findings(
        gpu
    )

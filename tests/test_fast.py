"""Notebook 10's tables and facts on the synthetic bench fixture (tests/fixtures/synthetic_bench.py)
and the shipped traces: side-by-side tables, jitter and 8-bit speed-ups, figures, the facts the
targets and findings read, and targets that flip when a number crosses its threshold."""

import json

import numpy as np
import pandas as pd
import pytest

from tests.fixtures.synthetic_bench import make_bench
from yolo_sm.analyse import fast, frames
from yolo_sm.analyse.bench_table import engines
from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract import hardware
from yolo_sm.contract.errors import UserError
from yolo_sm.report import fast_plots, goals
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, evaluate

PEAK = 450.0  # a made-up fp16 peak for the synthetic fixture


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


def _targets(df, peak=PEAK):
    found = fast.bench_facts(df, peak) + frames.pipeline_facts({fast.BENCH: df})
    return evaluate(goals.RULES, facts_table(found)).set_index("id")


def test_bench_facts_are_the_fixture_numbers(df):
    f = facts_table(fast.bench_facts(df, PEAK)).set_index(["key", "scope"]).value
    best = fast.best_engine(df, 1).loc[1.0]
    base = df[(df.variant == "eager/fp16/nhwc") & (df.batch == 1) & (df.width == 1.0)]
    ratio = best.median_ms / base.median_ms.item()
    assert f["fast.best16_latency_over_baseline", "width=1, batch=1"] == pytest.approx(ratio)
    assert "fp8" not in best.variant  # the best 16-bit engine
    best64 = fast.best_engine(df, 64).loc[1.5]
    share = f["fast.best16_tflops_over_fp16_peak", "width=1.5, batch=64"]
    assert share == pytest.approx(best64.tflops / PEAK)
    assert f["fast.rows_not_run", ""] == (df.status != "ok").sum()
    # without a measured peak the share is not a fact
    keys = {r["key"] for r in fast.bench_facts(df)}
    assert "fast.best16_tflops_over_fp16_peak" not in keys


def test_targets_flip_with_the_bench(df):
    v = _targets(df)
    assert (v.verdict != NOT_TESTED).sum() > 0 and len(v) == len(goals.RULES)
    d = _set_speed(df.copy(), "cudagraph/fp8/nhwc", 1.5, 64, 1.29, over="cudagraph/fp16/nhwc")
    assert _targets(d).verdict["goal_3_w1.5"] == FAILS
    d = _set_speed(df.copy(), "cudagraph/fp8/nhwc", 1.5, 64, 1.31, over="cudagraph/fp16/nhwc")
    assert _targets(d).verdict["goal_3_w1.5"] == HOLDS
    # an 8-bit engine that fails its numerical check gives no usable images: target missed
    bad = (d.variant == "cudagraph/fp8/nhwc") & (d.width == 1.5) & (d.batch == 64)
    d.loc[bad, ["status", "message", "img_per_s"]] = ["error", "NumericalMismatch: 0.103", None]
    assert _targets(d).verdict["goal_3_w1.5"] == FAILS
    # one that could not run leaves the target untested
    d.loc[bad, "message"] = "NotAvailableError: no fp8"
    assert _targets(d).verdict["goal_3_w1.5"] == NOT_TESTED
    # target 4: the pipeline against YOLO.predict
    at = (df.width == 0.5) & (df.batch == 16)
    fastest = df.loc[at & df.variant.str.startswith("pipeline/"), "img_per_s"].max()
    d = df.copy()
    for k, verdict in ((5.9, FAILS), (6.1, HOLDS)):
        d.loc[at & (d.variant == "ultralytics_predict"), "img_per_s"] = fastest / k
        assert _targets(d).verdict["goal_4_predict"] == verdict, k
    # the share of the peak moves with the measured peak
    share = _targets(df).measured["goal_2_peak_w1.5"]
    assert _targets(df, PEAK * share / 0.49).verdict["goal_2_peak_w1.5"] == FAILS
    assert _targets(df, PEAK * share / 0.51).verdict["goal_2_peak_w1.5"] == HOLDS


def test_targets_on_the_shipped_bench_read_the_measured_peak():
    from yolo_sm.contract.datasets import open_root

    root = open_root("h200")
    c = hardware.peak_rows(root.load("ceilings"))  # the burst rows where the table has regimes
    peak = c[c.ceiling == "matmul_fp16"].value.item()
    v = goals.verdicts(root).set_index("id")
    b = root.load("bench_fast_engines")
    best = fast.best_engine(b, 64).loc[2.0]
    assert v.measured["goal_2_peak_w2"] == pytest.approx(best.tflops / peak)
    widths = set(b.width)
    for w in goals.WIDTHS:  # a width the bench lacks is not tested
        assert (v.verdict[f"goal_1_w{w:g}"] == NOT_TESTED) == (w not in widths)


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
    j = frames.jitter(df)
    assert len(j) == 24 and (j.streams == 3).all()
    s1 = df[(df.variant.str.endswith("/s1")) & (df.width == 0.5) & (df.batch == 16)]
    s3 = df[(df.variant.str.endswith("/s3")) & (df.width == 0.5) & (df.batch == 16)]
    r = j[(j.width == 0.5) & (j.batch == 16)].iloc[0]
    assert r.jitter_1_ms == pytest.approx((s1.p99_ms - s1.median_ms).item())
    assert r.reduction == pytest.approx(
        1 - (s3.p99_ms - s3.median_ms).item() / (s1.p99_ms - s1.median_ms).item()
    )


def test_pipeline_table_and_figures(df):
    pt = frames.pipeline_table(df)
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
    assert b.loc["8-bit quantisation", fp16] == 0 < b.loc["8-bit quantisation", fp8]
    assert b.loc["SiLU", fp8] < 0.25 * b.loc["SiLU", fp16]
    f = facts_table(fast.fp8_trace_facts(k)).set_index("key").value
    assert "fast.fp8_over_fp16_gpu_time" not in f  # decided once, by claim_10_fp8


def test_triton_kernels_split_by_the_ops_inductor_names_them_after():
    """A pooling window, the int8 quantiser's saturate-and-round and a nearest upsample each
    form a part of their own; the rest of inductor's kernels stay one part; a kernel fusing a
    pool and a quantiser counts as pooling (first match); a non-Triton kernel with the same
    words is not Triton's."""
    names = {
        "triton_per_fused_max_pool2d_with_indices_16": ("triton", "pooling (Triton)"),
        "triton_per_fused_clamp_max_pool2d_trunc_3": ("triton", "pooling (Triton)"),
        "triton_poi_fused__to_copy_add_clamp_ge_int8_conv_mul_reciprocal_sub_trunc_where_7": (
            "triton",
            "8-bit quantisation (Triton)",
        ),
        "triton_poi_fused__to_copy__unsafe_index_add_arange_cat_clone_convolution_4": (
            "triton",
            "upsample (Triton)",
        ),
        "triton_poi_fused_convolution_silu_2": ("triton", "fused by torch.compile (Triton)"),
        "max_pool_forward_nhwc": ("pooling_upsample", "pooling / upsample"),
    }
    k = pd.DataFrame({"kernel_name": list(names), "kernel_class": [c for c, _ in names.values()]})
    assert list(fast.kernel_parts(k)) == [p for _, p in names.values()]


def test_compiled_int8_trace_splits_into_named_parts():
    """The shipped compiled int8 trace: every kernel in one part; the int8 quantiser fused by
    inductor only in the int8 engine, pooling in both; the trace table counts the fused
    quantiser against what the int8 convolutions and their epilogues save."""
    from yolo_sm.analyse import precision_8bit as p8
    from yolo_sm.contract import datasets

    k = datasets.load("h200/" + p8.TRACE_INT8_COMPILE)
    b = p8.int8_breakdown(k)
    assert np.allclose(b.drop("total").sum(), b.loc["total"])
    int8 = [c for c in b.columns if "_int8_" in c]
    fp16 = [c for c in b.columns if "_fp16_" in c]
    assert int8 and fp16
    assert (b.loc["8-bit quantisation (Triton)", int8] > 0).all()
    assert (b.loc["8-bit quantisation (Triton)", fp16] == 0).all()
    assert (b.loc["pooling (Triton)", b.columns] > 0).all()
    t = p8.trace_table(b)
    assert (t.quantise_ms > 0).all() and np.isfinite(t.quantise_over_saving).all()


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
    f = facts_table(fast.compile_trace_facts(k)).set_index("key").value
    assert f["fast.compile_launches_over_eager"] == pytest.approx(n["compile"] / n["eager"])
    saved = b.loc["total", "eager"] - b.loc["total", "compile"]
    conv = sum(fast.part_ms(b, e, fast.CONV_PARTS) * s for e, s in (("eager", 1), ("compile", -1)))
    assert f["fast.compile_saving_from_convolutions_pct"] == pytest.approx(conv / saved * 100)
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
    from yolo_sm.collect.probe import GPU_STAGES, STAGES, probe_pipeline

    probe, state = probe_pipeline(
        width=0.125, batch=2, reps=2, device="cpu", imgsz=160, frames="bus", keep_state=True
    )
    assert state["decoded"].shape[0] == 2 and tuple(state["frames"].shape[1:3]) == (1080, 810)
    state["engine"].close()
    t = frames.pipeline_stages(probe)
    assert t.stage.tolist() == [s for s in STAGES if s not in GPU_STAGES]
    one = t.set_index("stage").loc["batch, 1 stream", "share_of_1_stream_batch"]
    assert one == pytest.approx(1.0)
    f = facts_table(frames.probe_facts({"p": probe})).set_index("key").value
    ms = probe.set_index("stage").wall_ms
    assert f["fast.probe_1_over_3_streams"] == pytest.approx(
        ms["batch, 1 stream"] / ms["batch, 3 streams"]
    )
    five = ms.reindex(["h2d", "letterbox", "engine", "decode", "postprocess"]).sum()
    assert f["fast.probe_engine_share_pct"] == pytest.approx(ms["engine"] / five * 100)


def test_probe_stages_puts_each_probe_in_its_own_block_by_width_and_batch():
    """Two probes (the shipped one at width 0.5 batch 16, and a copy relabelled width 0.25 batch
    64 with its 1-stream batch twice as long): one block each, the narrower first, each block's
    shares against its own 1-stream batch."""
    from yolo_sm.contract.datasets import open_root

    shipped = open_root("h200").load(frames.PROBE)
    one = shipped.stage == "batch, 1 stream"
    other = shipped.assign(width=0.25, batch=64)
    other.loc[one, "wall_ms"] *= 2
    t = frames.probe_stages({"a": shipped, "b": other})
    assert len(t) == 2 * len(shipped) and list(t.columns[:3]) == ["width", "batch", "stage"]
    assert t.width.tolist() == [0.25] * len(shipped) + [0.5] * len(shipped)
    eng = t[t.stage == "engine"].set_index("width").share_of_1_stream_batch
    assert eng[0.25] == pytest.approx(eng[0.5] / 2)
    assert frames.probe_stages({}).empty


@pytest.mark.parametrize(
    "section",
    (
        fast_plots.side_by_side,
        fast_plots.units,
        fast_plots.speedup_figure,
        fast_plots.failures,
        fast_plots.pipeline,
        fast_plots.pipeline_figure,
        fast_plots.probe,
        fast_plots.compile_breakdown,
        fast_plots.compile_figure,
        fast_plots.fp8_breakdown,
        fast_plots.fp8_figure,
        fast_plots.fp8_dates,
    ),
    ids=lambda f: f.__name__,
)
def test_sections_need_their_datasets(section, tmp_path):
    import json

    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.sections import Note

    (tmp_path / "manifest.json").write_text(json.dumps({"datasets": {}}))
    note = section(open_root(tmp_path))
    assert isinstance(note, Note) and len(note.splitlines()) == 1
    assert not isinstance(section(open_root("h200")), Note)


def _speed(df):
    found = fast.bench_facts(df, PEAK) + frames.pipeline_facts({fast.BENCH: df})
    return evaluate(goals.SPEED_RULES, facts_table(found)).set_index("id")


def test_speed_goals_flip_with_the_bench(df):
    """Goal 1 holds the pipeline against the fastest engine of its unit, whichever it is; goal 3
    the fastest engine against max-autotune-no-cudagraphs, untested where that was not timed."""
    at = (df.width == 0.5) & (df.batch == 16)
    model = at & ~df.variant.str.startswith("pipeline/") & (df.variant != "ultralytics_predict")
    pipe = df.loc[at & df.variant.str.startswith("pipeline/"), "img_per_s"].max()
    fastest = df.loc[model & (df.status == "ok"), "img_per_s"].idxmax()
    for k, verdict in ((0.84, FAILS), (0.86, HOLDS)):
        d = df.copy()
        d.loc[model, "img_per_s"] = d.loc[model, "img_per_s"].clip(upper=pipe / k)
        d.loc[fastest, "img_per_s"] = pipe / k
        v = _speed(d)
        assert v.measured["speed_1_w0.5_b16"] == pytest.approx(k)
        assert v.verdict["speed_1_w0.5_b16"] == verdict
    d = df.copy()
    mt = (d.width == 1.0) & (d.batch == 64) & (d.variant == fast.MAX_AUTOTUNE)
    others = (d.width == 1.0) & (d.batch == 64) & ~mt & (d.status == "ok")
    others &= ~d.variant.str.startswith("pipeline/") & (d.variant != "ultralytics_predict")
    best = d.loc[others, "img_per_s"].max()
    for k, verdict in ((1.01, FAILS), (0.99, HOLDS)):
        d.loc[mt, "img_per_s"] = best * k
        assert _speed(d).verdict["speed_3_w1"] == verdict, k
    untimed = _speed(df[df.variant != fast.MAX_AUTOTUNE])
    assert untimed.verdict["speed_3_w1"] == NOT_TESTED


def test_config_of_reads_the_label_not_a_substring():
    from yolo_sm.analyse.fast import config_of

    cfgs = ["idle", "yolov8_w1_fp8_nhwc_b64", "yolov8_w1_fp16_nhwc_b64"]
    assert config_of(cfgs, "fp16") == "yolov8_w1_fp16_nhwc_b64"
    assert config_of(cfgs, "fp8") == "yolov8_w1_fp8_nhwc_b64"
    assert config_of(["my_fp16_model"], "fp16") is None  # not a config label


def test_the_autotune_bench_decides_goal_3_where_the_root_holds_it(df, tmp_path):
    """bench_autotune (its own plan step) replaces bench_fast_engines' max-autotune rows in the
    facts: the verdict and the build seconds come from it; without it, from the bench."""
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.contract.manifest import register
    from yolo_sm.contract.store import write_atomic

    mt = (df.width == 1.0) & (df.batch == 64) & (df.variant == fast.MAX_AUTOTUNE)
    others = (df.width == 1.0) & (df.batch == 64) & ~mt & (df.status == "ok")
    others &= ~df.variant.str.startswith("pipeline/") & (df.variant != "ultralytics_predict")
    best = df.loc[others, "img_per_s"].max()
    bench = df.copy()
    bench.loc[mt, "img_per_s"] = best * 1.2  # max-autotune ahead in the big bench
    tuned = df[(df.width == 1.0) & (df.batch == 64)].copy()
    tuned.loc[mt, ["img_per_s", "build_s"]] = [best * 0.8, 312.0]  # behind in its own
    write_atomic(bench, tmp_path / "b.parquet")
    register(tmp_path, "bench_fast_engines", "b.parquet", "bench", "b", "cmd")

    def verdicts():
        f = fast.facts(open_root(tmp_path))
        return evaluate(goals.SPEED_RULES, f).set_index("id"), f.set_index("key")

    v, _ = verdicts()
    assert v.measured["speed_3_w1"] == pytest.approx(1 / 1.2) and v.verdict["speed_3_w1"] == FAILS
    write_atomic(tuned, tmp_path / "t.parquet")
    register(tmp_path, fast.AUTOTUNE_DATASET, "t.parquet", "bench", "t", "cmd")
    v, f = verdicts()
    assert v.measured["speed_3_w1"] == pytest.approx(1 / 0.8) and v.verdict["speed_3_w1"] == HOLDS
    assert (f.index == "fast.best_over_max_autotune").sum() == 1  # w1.0 b64 only, from t
    assert f.loc["fast.max_autotune_build_s", "value"] == 312.0
    assert v.verdict["speed_3_w0.5"] == NOT_TESTED  # the autotune bench did not time it


def test_the_max_autotune_build_says_what_it_found_in_the_cache():
    """fast.max_autotune_build_s's note: the build's cache state and the ops it autotuned
    afresh, so a build that read its autotuning from disk is not taken for a cold one."""
    row = pd.Series({"compile_cache": "partial", "autotuned_ops": 0.0})
    assert fast.build_found(row) == "inductor's cache partial, 0 op(s) autotuned afresh"
    row = pd.Series({"compile_cache": "cold", "autotuned_ops": 57})
    assert fast.build_found(row) == "inductor's cache cold, 57 op(s) autotuned afresh"
    assert fast.build_found(pd.Series({"compile_cache": "cold", "autotuned_ops": None})) == (
        "inductor's cache cold"
    )  # measured before the column was recorded
    assert fast.build_found(pd.Series({"img_per_s": 1.0})) == ""
    row = pd.Series({"compile_cache": "partial", "autotuned_ops": 16, "autotune_reads": 29.0})
    assert fast.build_found(row) == (
        "inductor's cache partial, 16 op(s) autotuned afresh, 29 autotuning(s) read from disk"
    )


def test_the_gap_to_max_autotune_is_judged_against_the_rows_spread():
    """speed_3_gap_in_spread: the fastest engine's median forward minus max-autotune's, over the
    larger IQR of the two rows; within it (<= 1) or beyond it, and negative when ahead."""
    from yolo_sm.analyse.facts import facts_table

    def row(variant, ms, iqr):
        return {"width": 1.0, "batch": 64, "variant": variant, "scope": "model_only",
                "status": "ok", "median_ms": ms, "iqr_ms": iqr, "img_per_s": 64e3 / ms}  # fmt: skip

    def verdict(best_ms, iqr):
        bench = pd.DataFrame(
            [row(fast.MAX_AUTOTUNE, 20.0, 0.2), row("compile/fp16/nhwc", best_ms, iqr),
             row("cudagraph/fp16/nhwc", 30.0, 0.1), row("eager/fp16/nhwc", 31.0, 0.1)]
        )  # fmt: skip
        f = facts_table(fast.autotune_spread_facts(bench))
        return evaluate(goals.SPEED_RULES, f).set_index("id").loc["speed_3_gap_in_spread_w1"]

    v = verdict(20.3, 0.5)  # 0.3 ms behind, IQR up to 0.5 ms
    assert v.measured == pytest.approx(0.6) and v.verdict == HOLDS
    v = verdict(20.3, 0.1)  # 0.3 ms behind, IQR up to 0.2 ms
    assert v.measured == pytest.approx(1.5) and v.verdict == FAILS
    assert verdict(19.8, 0.1).measured == pytest.approx(-1.0)  # ahead
    assert fast.autotune_spread_facts(pd.DataFrame([row("compile/fp16/nhwc", 20.0, 0.1)])) == []


def test_every_goal_names_a_point_its_plan_step_measures():
    """A goal whose (width, batch) its dataset's plan step never measures reads "not tested" on
    every root, whatever is collected: each rule's scope lies in its step's grid."""
    import re

    from yolo_sm.contract.plans import load_yaml

    steps = {s["name"]: s for s in load_yaml("data/plans/h200.yaml")["steps"]}
    checked = 0
    for rule in goals.RULES + goals.SPEED_RULES:
        m = re.fullmatch(r"width=([\d.]+), batch=(\d+)", rule.scope)
        if m is None:
            continue
        width, batch = float(m.group(1)), int(m.group(2))
        for name in rule.datasets:
            params = steps[name]["params"]
            if "widths" not in params:  # a step without a per-width grid (the ceilings)
                continue
            widths, batches = (
                v if isinstance(v, list) else [v] for v in (params["widths"], params["batches"])
            )  # a trace step may name one batch as a scalar
            assert width in widths, (rule.id, name, "width")
            assert batch in batches, (rule.id, name, "batch")
            checked += 1
    assert checked >= len(goals.SPEED_RULES)


def _pool_trace(pool_us: float, other_us: float, config="yolov8_w1_int8_nhwc_b64"):
    """A compiled engine's Kineto table of two forwards: an inductor max-pool kernel and a
    convolution, each once per forward."""
    rows = []
    for it in (0, 1):
        rows.append(("triton_per_fused_max_pool2d_with_indices_1", "triton", pool_us, it))
        rows.append(("sm90_xmma_fprop_implicit_gemm", "tensor_core_conv", other_us, it))
    k = pd.DataFrame(rows, columns=["kernel_name", "kernel_class", "duration_us", "iteration"])
    return k.assign(config=config)


@pytest.mark.parametrize("pool_us, verdict", [(2.0, HOLDS), (5.0, "partly"), (17.0, FAILS)])
def test_the_compiled_pool_rule_flips_with_the_largest_pool_share(pool_us, verdict):
    from yolo_sm.report.findings import fast as findings

    traces = {
        "trace_compile_w1_b64": _pool_trace(1.0, 99.0, "yolov8_w1_fp16_nhwc_b64"),
        "trace_int8_compile_b64": _pool_trace(pool_us, 100.0 - pool_us),
    }
    f = facts_table(fast.pool_share_facts(traces))
    row = f.set_index("key").loc["fast.compiled_pool_share_max_pct"]
    assert row.value == pytest.approx(pool_us)
    assert "trace_int8_compile_b64: yolov8_w1_int8_nhwc_b64" in row.note.split(";")[0]
    (rule,) = [r for r in findings.RULES if r.id == "fast_compiled_pools_small"]
    assert evaluate([rule], f).verdict.item() == verdict
    assert fast.pool_share_facts({}) == []


def test_the_shipped_compiled_traces_give_the_pool_share_of_their_breakdown():
    from yolo_sm.contract import datasets

    traces = {n: datasets.load(f"h200/{n}") for n in fast.COMPILED_TRACES}
    (f,) = fast.pool_share_facts(traces)
    shares = []
    for k in traces.values():
        b = fast.time_breakdown(k)
        shares += [b.loc["pooling (Triton)", c] / b.loc["total", c] * 100 for c in b.columns]
    assert f["value"] == pytest.approx(max(shares))


def test_goal_3_waits_for_a_unit_that_lacks_an_engine_of_its_plan(df, tmp_path):
    """An autotune unit measured before an engine joined its plan step does not know its
    fastest engine: speed_3 is not tested there until the unit is measured again, and the
    notebook names the unit and the engine it lacks."""
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.contract.manifest import register
    from yolo_sm.contract.store import write_atomic
    from yolo_sm.report.sections import Note

    tuned = df[(df.width == 1.0) & (df.batch == 64)]
    write_atomic(tuned, tmp_path / "t.parquet")
    held = sorted(set(engines(tuned, baseline=True).variant))
    added = "compile:reduce-overhead+sep-pool/fp16/nhwc"
    assert added not in held

    def verdict(planned):
        register(tmp_path, fast.AUTOTUNE_DATASET, "t.parquet", "bench", "t", "cmd",
                 params={"engines": planned})  # fmt: skip
        root = open_root(tmp_path)
        v = evaluate(goals.SPEED_RULES, fast.facts(root)).set_index("id").verdict
        return v["speed_3_w1"], fast_plots.autotune_incomplete(root)

    v, shown = verdict(held)
    assert v in (HOLDS, FAILS) and isinstance(shown, Note)
    v, shown = verdict([*held, added])
    assert v == NOT_TESTED and not isinstance(shown, Note)
    assert added in shown.to_html()


def test_goal_1_leaves_out_a_pipeline_unit_that_lacks_an_engine_of_its_plan(df, tmp_path):
    """The pipeline is held against the fastest engine of its unit: a unit measured before an
    engine joined its plan step does not know that engine, so speed_1 is not tested there."""
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.contract.manifest import register
    from yolo_sm.contract.store import write_atomic

    write_atomic(df, tmp_path / "b.parquet")
    held = sorted(set(engines(df, baseline=True).variant))
    lacking = df[~((df.width == 0.5) & (df.batch == 16) & (df.variant == held[0]))]

    def verdict(table):
        write_atomic(table, tmp_path / "b.parquet")
        register(tmp_path, fast.BENCH, "b.parquet", "bench", "b", "cmd",
                 params={"engines": held})  # fmt: skip
        v = evaluate(goals.SPEED_RULES, fast.facts(open_root(tmp_path))).set_index("id").verdict
        return v["speed_1_w0.5_b16"], v["speed_1_w1_b16"]

    here, there = verdict(df)
    assert here in (HOLDS, FAILS) and there in (HOLDS, FAILS)
    assert verdict(lacking) == (NOT_TESTED, there)


def test_an_engine_the_plan_added_after_the_last_run_makes_the_unit_incomplete(df, tmp_path):
    """The manifest records the params of a bench's last run; the root's collection_time
    snapshot records what the plan names now. An engine only the latter names still leaves
    the units that lack it undecided; a snapshot whose plan_params are not JSON is one
    sentence."""
    from yolo_sm.analyse.bench_table import planned_engines
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.contract.errors import UserError
    from yolo_sm.contract.manifest import register
    from yolo_sm.contract.schema import COLLECTION_TIME
    from yolo_sm.contract.store import write_atomic

    tuned = df[(df.width == 1.0) & (df.batch == 64)]
    write_atomic(tuned, tmp_path / "t.parquet")
    held = sorted(set(engines(tuned, baseline=True).variant))
    register(tmp_path, fast.AUTOTUNE_DATASET, "t.parquet", "bench", "t", "cmd",
             params={"engines": held})  # fmt: skip
    added = "compile:reduce-overhead+sep-pool/fp16/nhwc"

    def snapshot(text):
        snap = pd.DataFrame(
            {"step": [fast.AUTOTUNE_DATASET, "other"], "kind": "bench", "state": "partial",
             "spent_s": 1.0, "left_s": 1.0, "plan_s": 2.0,
             "plan_params": [text, json.dumps({"engines": ["x"]})]}
        )  # fmt: skip
        write_atomic(snap, tmp_path / "c.parquet")
        register(tmp_path, COLLECTION_TIME, "c.parquet", COLLECTION_TIME, "c", "cmd")
        root = open_root(tmp_path)
        v = evaluate(goals.SPEED_RULES, fast.facts(root)).set_index("id").verdict
        return planned_engines(root, fast.AUTOTUNE_DATASET), v["speed_3_w1"]

    names, v = snapshot(json.dumps({"engines": held}))
    assert names == tuple(held) and v in (HOLDS, FAILS)
    names, v = snapshot(json.dumps({"engines": [*held, added]}))
    assert names == (*held, added) and v == NOT_TESTED
    with pytest.raises(UserError, match="plan_params of step bench_autotune are not JSON"):
        snapshot("{engines")


def test_the_steps_undecided_goals_wait_for_carry_what_the_snapshot_says_is_left(make_root):
    """goals.waiting_steps: the steps the undecided criteria wait for (goal 3's warm build: its
    bench and the compile-cache step), each with the state and left seconds of the root's
    collection_time snapshot; waiting_cost sums them and, without a baseline, says what a
    sample root for goal 4 takes, or says the root has no snapshot."""
    from yolo_sm.analyse import collection_time
    from yolo_sm.contract.datasets import open_root

    root = open_root(make_root("r", ["bench_autotune", "collection_time"]))
    steps = goals.waiting_steps(root).set_index("step")
    snap = collection_time.snapshot(root).set_index("step")
    assert {"bench_autotune", "bench_compile_cache"} <= set(steps.index)
    assert steps.loc["bench_compile_cache", "goals"] == "3"
    for step, r in steps.iterrows():
        assert r.state == snap.loc[step, "state"] and r.left_s == snap.loc[step, "left_s"]
    assert not steps.goals.str.contains("4").any()  # goal 4 waits for another root
    text = goals.waiting_cost(root)
    assert f"takes up to about {steps.left_s.sum():,.0f} s" in text
    assert f"bench_compile_cache {snap.loc['bench_compile_cache', 'left_s']:,.0f} s" in text
    # goal 4, without a baseline: what a sample root of the plan takes, by the same snapshot
    sample = collection_time.sample_cost(snap.reset_index(), 1)["sample_s"].sum()
    assert f"--sample 1`, into an empty folder): about {sample:,.0f} s" in text
    assert sample < snap["plan_s"].sum()  # a share of the whole plan
    with_baseline = goals.waiting_cost(root, open_root("h200"))
    assert "Goal 4" not in with_baseline and with_baseline.startswith("Deciding the criteria")
    old = goals._sample_cost(snap.reset_index().drop(columns="groups"))
    assert "saved without the steps' sample groups" in old
    bare = open_root(make_root("b", ["bench_autotune"]))
    no_snapshot = goals.waiting_steps(bare)
    assert set(no_snapshot.step) == set(steps.index) and no_snapshot.left_s.isna().all()
    assert goals.waiting_cost(bare).startswith("This root has no collection_time snapshot")


def test_each_undecided_goal_criterion_says_what_it_waits_for(df, tmp_path, make_root):
    """goals.waiting: per criterion not tested, the dataset the root lacks, the unit its bench
    did not measure, the engines the unit lacks, or goal 4's baseline; a decided criterion is
    not listed."""
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.contract.manifest import register
    from yolo_sm.contract.store import write_atomic

    empty = goals.waiting(open_root(make_root("e", ["ceilings"])))
    by = empty.set_index("id").waits_for
    assert by["speed_3_w1"] == "bench_autotune: none in this root"
    assert by["speed_3_warm_build_w1"] == "bench_autotune, bench_compile_cache: none in this root"
    assert by["speed_4"] == "a baseline root (BASELINE) to compare with"
    assert set(empty.goal) == {1, 2, 3, 4}

    tuned = df[df.width.isin([0.5, 1.0]) & (df.batch == 64)]
    write_atomic(tuned, tmp_path / "t.parquet")
    held = sorted(set(engines(tuned, baseline=True).variant))
    added = "compile:reduce-overhead+sep-pool/fp16/nhwc"

    def waits(planned):
        register(tmp_path, fast.AUTOTUNE_DATASET, "t.parquet", "bench", "t", "cmd",
                 params={"engines": planned})  # fmt: skip
        return goals.waiting(open_root(tmp_path)).set_index("id").waits_for

    by = waits([*held, added])
    assert by["speed_3_w1"] == f"the unit of bench_autotune lacks {added}"
    assert by["speed_3_warm_build_w0.5"].endswith(f"lacks {added}")
    assert by["speed_3_w2"] == "the unit not measured in bench_autotune"
    by = waits(held)
    assert "speed_3_w1" not in by and "speed_3_w0.5" not in by  # decided: not waiting
    # the fastest engine here compiles nothing: a compile-cache build of its width decides
    (best,) = [b for (w, bt), _, b in fast.stock_and_fastest(tuned) if (w, bt) == (1.0, 64)]
    assert best.backend != "compile"
    assert by["speed_3_warm_build_w1"] == (
        f"a build at width 1, batch 64 in bench_compile_cache (the fastest engine, "
        f"{best.variant}, compiles nothing)"
    )

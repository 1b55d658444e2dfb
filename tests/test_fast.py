"""Notebook 10's tables and facts on the synthetic bench fixture (tests/fixtures/synthetic_bench.py)
and the shipped traces: side-by-side tables, the engine ranking, jitter and 8-bit speed-ups,
figures, and the facts the findings read."""

import json

import numpy as np
import pandas as pd
import pytest

from tests.fixtures.synthetic_bench import make_bench
from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract.errors import UserError
from yolo_sm.report.rules import FAILS, HOLDS, evaluate
from yolo_sm.topics.deploy import analyse as fast
from yolo_sm.topics.deploy import frames
from yolo_sm.topics.deploy import recommend as fast_recommend
from yolo_sm.topics.deploy import report as fast_plots


@pytest.fixture
def df():
    return make_bench()


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


def test_bench_facts_are_the_fixture_numbers(df):
    f = facts_table(fast.bench_facts(df)).set_index(["key", "scope"]).value
    # recomputed with plain pandas: per batch, the median over widths of the fastest 16-bit
    # model-only engine's img/s over eager fp16 NHWC's of the same unit
    ok = df[(df.status == "ok") & (df.scope == "model_only")]
    base = ok[ok.variant == "eager/fp16/nhwc"].set_index(["batch", "width"]).img_per_s
    best = ok[(ok.variant != "eager/fp16/nhwc") & (ok.precision != "fp8")]
    best = best.groupby(["batch", "width"]).img_per_s.max()
    for b in (1, 16, 64):
        want = (best / base).loc[b].median()
        assert f["fast.best16_img_per_s_over_baseline_median", f"batch={b}"] == pytest.approx(want)
    assert f["fast.rows_not_run", ""] == (df.status != "ok").sum()


PEAKS = {"fp16": 450.0, "fp8": 900.0}  # made-up matmul peaks for the synthetic fixture


def test_the_ranking_is_each_regimes_engines_by_their_share_of_the_fastest(df):
    """fast_recommend.ranking recomputed with plain pandas: per batch, each engine's img/s over
    the unit's fastest, median over widths, in descending order; its TFLOP/s over the peak of
    its precision."""
    r = fast_recommend.engine_ranking(df, PEAKS)
    ok = df[(df.status == "ok") & (df.scope == "model_only")].copy()
    ok["share"] = ok.img_per_s / ok.groupby(["batch", "width"]).img_per_s.transform("max")
    for b, g in r.groupby("batch"):
        want = ok[ok.batch == b].groupby("variant").share.median().sort_values(ascending=False)
        assert g.engine.tolist() == want.index.tolist()
        assert g.of_fastest.tolist() == pytest.approx(want.tolist())
        assert g["rank"].tolist() == list(range(1, len(g) + 1))
    row = r[(r.batch == 64) & (r.engine == "cudagraph/fp8/nhwc")].iloc[0]
    fp8 = ok[(ok.batch == 64) & (ok.variant == "cudagraph/fp8/nhwc")]
    assert row.roof_pct == pytest.approx((100 * fp8.tflops / PEAKS["fp8"]).median())
    assert row.widths == f"{fp8.width.nunique()} of {ok[ok.batch == 64].width.nunique()}"
    assert np.isnan(fast_recommend.engine_ranking(df).roof_pct).all()  # no measured peak: no share


def test_the_ranking_flips_when_an_engine_becomes_the_fastest(df):
    first = fast_recommend.engine_ranking(df).query("batch == 64").engine.iloc[0]
    second = fast_recommend.engine_ranking(df).query("batch == 64").engine.iloc[1]
    for w in sorted(set(df.width)):
        at = (df.width == w) & (df.batch == 64) & (df.status == "ok") & (df.scope == "model_only")
        if (at & (df.variant == second)).any():
            top = df.loc[at, "img_per_s"].max()
            df.loc[at & (df.variant == second), "img_per_s"] = 2 * top
    moved = fast_recommend.engine_ranking(df).query("batch == 64")
    assert moved.engine.iloc[0] == second and moved.engine.iloc[1] == first


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
    from yolo_sm.contract import datasets
    from yolo_sm.topics.precision import eight_bit as p8

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
    from yolo_sm.topics.deploy.collect_probe import GPU_STAGES, STAGES, probe_pipeline

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
        fast_plots.ranking,
    ),
    ids=lambda f: f.__name__,
)
def test_sections_need_their_datasets(section, tmp_path):

    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.sections import Note

    (tmp_path / "manifest.json").write_text(json.dumps({"datasets": {}}))
    note = section(open_root(tmp_path))
    assert isinstance(note, Note) and len(note.splitlines()) == 1
    assert not isinstance(section(open_root("h200")), Note)


def test_config_of_reads_the_label_not_a_substring():
    from yolo_sm.topics.deploy.analyse import config_of

    cfgs = ["idle", "yolov8_w1_fp8_nhwc_b64", "yolov8_w1_fp16_nhwc_b64"]
    assert config_of(cfgs, "fp16") == "yolov8_w1_fp16_nhwc_b64"
    assert config_of(cfgs, "fp8") == "yolov8_w1_fp8_nhwc_b64"
    assert config_of(["my_fp16_model"], "fp16") is None  # not a config label


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
    from yolo_sm.topics.deploy import rules as findings

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

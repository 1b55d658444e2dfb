"""Notebook 10's tables, facts and rules on the synthetic bench fixture
(tests/fixtures/synthetic_bench.py) and the shipped traces: each headline fact recomputed with
plain pandas and its verdict flipped by moving the fact; the ranking, the deploy pick, figures."""

import json

import numpy as np
import pandas as pd
import pytest

from tests.fixtures.synthetic_bench import make_bench
from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract.errors import UserError
from yolo_sm.report.rules import FAILS, HOLDS, evaluate, topic_rules
from yolo_sm.topics.deploy import analyse as fast
from yolo_sm.topics.deploy import frames, recommend
from yolo_sm.topics.deploy import report as fast_plots


@pytest.fixture
def df():
    return make_bench()


def _verdict(rule_id: str, facts) -> str:
    (rule,) = [r for r in topic_rules("deploy") if r.id == rule_id]
    return evaluate([rule], facts_table(facts)).verdict.item()


def test_side_by_side_tables(df):
    t = fast.side_by_side(df)
    assert len(t) == len(df) == 8 * 3 * 8
    first = t[(t.width == 0.25) & (t.batch == 1)]
    assert first.variant.iloc[0] == "eager/fp16/nhwc" and first.vs_baseline.iloc[0] == 1.0
    bad = fast.failures(df)
    assert len(bad) == 1 and bad.status.item() == "oom" and "out of memory" in bad.message.item()


def _speedups(df):
    """Per batch, the median over widths of the fastest 16-bit model-only engine's img/s over
    eager fp16 NHWC's of the same width, in plain pandas."""
    ok = df[(df.status == "ok") & (df.scope == "model_only") & (df.precision != "fp8")]
    base = ok[ok.variant == "eager/fp16/nhwc"].set_index(["batch", "width"]).img_per_s
    best = ok.groupby(["batch", "width"]).img_per_s.max()
    return (best / base).groupby(level="batch").median()


def test_the_speedup_headlines_are_recomputed_and_flip(df):
    f = facts_table(fast.speedup_facts(df, ("b",))).set_index(["key", "scope"]).value
    want = _speedups(df)
    key = "fast.best16_img_per_s_over_baseline_median"
    for b in (1, 16, 64):
        assert f[key, f"batch={b}"] == pytest.approx(want[b])
    # the baseline made faster until the fastest engine is under each threshold: the verdict flips
    for rule_id, batch, threshold in (("fast_b1_speedup", 1, 3.0), ("fast_b64_speedup", 64, 1.3)):
        assert _verdict(rule_id, fast.speedup_facts(df, ("b",))) == HOLDS
        slow = df.copy()
        at = (slow.batch == batch) & (slow.variant == "eager/fp16/nhwc")
        slow.loc[at, "img_per_s"] *= want[batch] / threshold * 1.05
        assert _speedups(slow)[batch] < threshold
        assert _verdict(rule_id, fast.speedup_facts(slow, ("b",))) == FAILS


def test_the_speedup_fact_carries_the_clock_spread_of_its_rows(df):
    clocked = df.assign(prov_sm_clock_mhz=1980.0)
    clocked.loc[clocked.variant == "eager/fp16/nhwc", "prov_sm_clock_mhz"] = 1485.0
    (row, *_) = fast.speedup_facts(clocked, ("b",))
    assert row["clock_spread_pct"] == pytest.approx(25.0)


def test_the_predict_headline_is_the_least_best_pipeline_over_predict_and_flips(df):
    ok = df[df.status == "ok"]
    pipe = ok[ok.variant.str.startswith("pipeline/")].groupby(["width", "batch"]).img_per_s.max()
    pred = ok[ok.variant == "ultralytics_predict"].set_index(["width", "batch"]).img_per_s
    want = (pipe / pred).min()
    (f,) = fast.predict_facts(df, ("b",))
    assert f["value"] == pytest.approx(want)
    rule = "fast_pipeline_beats_predict"
    slow = df.copy()
    at = slow.variant == "ultralytics_predict"
    for scale, verdict in ((want / 3.5, HOLDS), (want / 2, "partly"), (want / 0.5, FAILS)):
        slow.loc[at, "img_per_s"] = df.loc[at, "img_per_s"] * scale
        assert _verdict(rule, fast.predict_facts(slow, ("b",))) == verdict


PEAKS = {"fp16": 450.0, "fp8": 900.0}  # made-up matmul peaks for the synthetic fixture


def test_the_ranking_is_each_regimes_paths_by_their_share_of_the_fastest_engine(df):
    """recommend.ranking recomputed with plain pandas: per batch, each path's img/s over the
    unit's fastest model-only engine, median over widths, in descending order; its TFLOP/s over
    the peak of its precision."""
    r = recommend.ranking(df, PEAKS)
    ok = df[(df.status == "ok") & (df.img_per_s > 0)].copy()
    fastest = ok[ok.scope == "model_only"].groupby(["batch", "width"]).img_per_s.max()
    ok["share"] = (
        ok.img_per_s / fastest.reindex(pd.MultiIndex.from_frame(ok[["batch", "width"]])).to_numpy()
    )
    for b, g in r.groupby("batch"):
        want = ok[ok.batch == b].groupby("variant").share.median().sort_values(ascending=False)
        assert g.variant.tolist() == want.index.tolist()
        assert g.vs_fastest_engine.tolist() == pytest.approx(want.tolist())
        assert g["rank"].tolist() == list(range(1, len(g) + 1))
    row = r[(r.batch == 64) & (r.variant == "cudagraph/fp8/nhwc")].iloc[0]
    fp8 = ok[(ok.batch == 64) & (ok.variant == "cudagraph/fp8/nhwc")]
    assert row.roof_pct == pytest.approx((100 * fp8.tflops / PEAKS["fp8"]).median())
    assert row.units == len(fp8)
    assert np.isnan(recommend.ranking(df).roof_pct).all()  # no measured peak: no share


def test_the_ranking_flips_when_an_engine_becomes_the_fastest(df):
    first = recommend.ranking(df).query("batch == 64").variant.iloc[0]
    second = recommend.ranking(df).query("batch == 64").variant.iloc[1]
    for w in sorted(set(df.width)):
        at = (df.width == w) & (df.batch == 64) & (df.status == "ok")
        if (at & (df.variant == second)).any():
            df.loc[at & (df.variant == second), "img_per_s"] = 2 * df.loc[at, "img_per_s"].max()
    moved = recommend.ranking(df).query("batch == 64")
    assert moved.variant.iloc[0] == second and moved.variant.iloc[1] == first


def test_deploy_picks_per_regime_the_fastest_pipeline_and_flips_with_it(df):
    ranked = recommend.ranking(df)
    d = recommend.deploy(ranked).set_index("batch")
    pipes = ranked[ranked.variant.str.startswith("pipeline/")]
    for b in (16, 64):
        best = pipes[pipes.batch == b].sort_values("img_per_s").variant.iloc[-1]
        assert d.loc[b, "deploy"] == best and d.loc[b, "scope"] == "frames_to_boxes"
    lowest = pipes[pipes.batch == 1].sort_values("median_ms").variant.iloc[0]
    assert d.loc[1, "deploy"] == lowest  # batch 1: latency
    assert "deploy" in recommend.deploy_line(d.reset_index().iloc[0])
    # the other pipeline made the fastest: the pick moves to it
    other = next(v for v in pipes.variant.unique() if v != d.loc[64, "deploy"])
    faster = df.copy()
    faster.loc[(faster.variant == other) & (faster.batch == 64), "img_per_s"] *= 10
    assert recommend.deploy(recommend.ranking(faster)).set_index("batch").loc[64, "deploy"] == other
    # no pipeline: the fastest model-only engine
    engines = recommend.deploy(recommend.ranking(df[~df.variant.str.startswith("pipeline/")]))
    assert (engines.scope == "model_only").all()


def test_caveats_name_what_each_path_asks():
    assert recommend.caveat("eager/fp16/nhwc").startswith("none")
    assert "8-bit" in recommend.caveat("cudagraph/fp8/nhwc")
    assert "rewritten" in recommend.caveat("compile+sep-pool/fp16/nhwc")
    assert "static batch" in recommend.caveat("pipeline/compile/fp16/nhwc/graph/s3")
    assert recommend.caveat("ultralytics_predict").startswith("none")


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

    k = datasets.load("h200/trace_int8_compile_b64")
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
    f = facts_table(fast.compile_facts(k)).set_index("key").value
    saved = b.loc["total", "eager"] - b.loc["total", "compile"]
    conv = sum(fast.part_ms(b, e, fast.CONV_PARTS) * s for e, s in (("eager", 1), ("compile", -1)))
    assert f["fast.compile_saving_from_convolutions_pct"] == pytest.approx(conv / saved * 100)
    with pytest.raises(UserError, match="no kernels of config"):
        fast.compare_backends({"eager": k}, "yolov8_w9_fp16_nhwc_b1")


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
    t = frames.probe_stages({"p": probe})
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
        fast_plots.speedup_figure,
        fast_plots.failures,
        fast_plots.pipeline,
        fast_plots.pipeline_figure,
        fast_plots.probe,
        fast_plots.compile_breakdown,
        fast_plots.compile_figure,
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


def test_the_answer_is_one_line_per_regime_or_one_line_saying_what_is_missing(tmp_path):
    from yolo_sm.contract.datasets import open_root

    (tmp_path / "manifest.json").write_text(json.dumps({"datasets": {}}))
    assert len(fast_plots.answer(open_root(tmp_path)).splitlines()) == 1
    lines = fast_plots.answer(open_root("h200")).splitlines()
    assert [ln.split(" (")[0] for ln in lines] == ["- batch 1", "- batch 16", "- batch 64"]


def test_near_ties_among_engines_go_to_the_faster_build():
    rows = [
        ("eager/fp16/nhwc", 1000.0, 2.0),
        ("cudagraph/fp16/nhwc", 1010.0, 1.0),
        ("compile/fp16/nhwc", 1500.0, 20.0),
        ("compile:reduce-overhead/fp16/nhwc", 1480.0, 5.0),
    ]
    b = pd.DataFrame(rows, columns=["variant", "img_per_s", "build_s"]).assign(
        width=1.0, batch=64, status="ok", scope="model_only", median_ms=lambda d: 64e3 / d.img_per_s
    )
    pick = recommend.deploy(recommend.ranking(b)).deploy.item()
    assert pick == "compile:reduce-overhead/fp16/nhwc"  # within 5 %, builds faster
    assert recommend.deploy(recommend.ranking(b), near=0.0).deploy.item() == "compile/fp16/nhwc"


def test_the_workload_sentence_quotes_the_bench():
    from yolo_sm.contract.datasets import open_root

    bench = open_root("h200").load("bench_fast_engines")
    text = recommend.workload_sentence(bench)
    assert f"{bench.candidates_per_frame.max():,.0f} candidates" in text
    assert "did not count" in recommend.workload_sentence(
        bench.drop(columns="candidates_per_frame")
    )


def _copyfree_bench(rates: dict) -> pd.DataFrame:
    """A bench of (width -> {variant: img/s}) at batch 64, clocks equal but one."""
    slow = (2.0, "copyfree/fp16/nhwc")  # the one unit timed at a lower clock
    rows = [
        {"width": w, "batch": 64, "variant": v, "scope": "model_only", "status": "ok",
         "img_per_s": r, "sm_clock_mhz": 1700.0 if (w, v) == slow else 1980.0,
         "precision": "fp16", "tflops": r / 10, "vs_baseline": 1.0}
        for w, per in rates.items() for v, r in per.items()
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_copyfree_facts_recomputed_and_flipped():
    """The copy-free rules' facts recomputed by hand: the least copy-free / CUDA-graph img/s
    ratio over widths (with the clock spread of its units) and the copy kernels per copy-free
    forward; moving either across its threshold flips the verdict."""
    rates = {
        0.5: {"eager/fp16/nhwc": 90.0, "cudagraph/fp16/nhwc": 100.0, "copyfree/fp16/nhwc": 130.0},
        2.0: {"eager/fp16/nhwc": 50.0, "cudagraph/fp16/nhwc": 60.0, "copyfree/fp16/nhwc": 63.0},
    }
    bench = _copyfree_bench(rates)
    kernels = pd.DataFrame({
        "config": ["copy-free"] * 4 + ["CUDA graph"] * 3,
        "iteration": [0, 0, 1, 1, 0, 0, 0],
        "kernel_class": ["tensor_core_conv", "copy_concat"] * 3 + ["copy_concat"],
        "kernel_name": ["cudnn_conv", "direct_copy_kernel"] * 3 + ["CatArrayBatchedCopy"],
        "duration_us": [990.0, 10.0, 1000.0, 4.0, 1000.0, 300.0, 100.0],
    })  # fmt: skip
    f = facts_table(fast.copyfree_facts(bench, kernels)).set_index("key")
    ratio = min(p["copyfree/fp16/nhwc"] / p["cudagraph/fp16/nhwc"] for p in rates.values())
    assert f.value["fast.copyfree_over_cudagraph_min"] == pytest.approx(ratio) == 1.05
    assert f.clock_spread_pct["fast.copyfree_over_cudagraph_min"] == pytest.approx(280 / 1980 * 100)
    mine = kernels[kernels.config == "copy-free"]
    per_forward = (mine.kernel_class == "copy_concat").sum() / mine.iteration.nunique()
    assert f.value["fast.copyfree_copy_kernels"] == per_forward == 1.0
    assert _verdict("fast_copyfree_beats_graph", fast.copyfree_facts(bench)) == HOLDS
    assert _verdict("fast_copyfree_no_copies", fast.copyfree_facts(None, kernels)) == FAILS
    rates[2.0]["copyfree/fp16/nhwc"] = 57.0  # slower than the graph at one width
    assert (
        _verdict("fast_copyfree_beats_graph", fast.copyfree_facts(_copyfree_bench(rates))) == FAILS
    )
    copyless = kernels.drop(index=[1, 3])  # the copy-free forwards without their copy kernels
    assert _verdict("fast_copyfree_no_copies", fast.copyfree_facts(None, copyless)) == HOLDS

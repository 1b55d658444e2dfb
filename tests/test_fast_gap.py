"""Speed goal 1's gap as two factors (yolo_sm.analyse.frames.pipeline_gap) and the finding that the
pipeline's engine alone keeps the goal out of reach."""

from __future__ import annotations

import pandas as pd
import pytest

from yolo_sm.analyse import frames
from yolo_sm.analyse.facts import facts_table
from yolo_sm.contract.datasets import open_root
from yolo_sm.report.findings import fast as findings
from yolo_sm.report.rules import FAILS, HOLDS, evaluate

CG = "cudagraph/fp16/nhwc"


def _timing(bench: pd.DataFrame) -> pd.DataFrame:
    """The latency and stream columns a bench's pipeline rows carry (1 ms p50, 2 ms p99)."""
    streams = bench.variant.str.extract(r"/s(\d+)$")[0].astype(float)
    return bench.assign(
        median_ms=1.0,
        p99_ms=2.0,
        streams=streams,
        pipeline_vs_model_only=bench.img_per_s / bench.model_only_img_per_s,
    )


def _bench(compile_img_per_s: float) -> pd.DataFrame:
    """One unit (width 1.0, batch 16): eager 100, CUDA graph 110 and compile img/s, the
    pipeline around the CUDA graph at 60 (one stream) and 90 frames/s (three), predict 10."""
    rows = [
        ("eager/fp16/nhwc", "model_only", 100.0, None),
        (CG, "model_only", 110.0, None),
        ("compile/fp16/nhwc", "model_only", compile_img_per_s, None),
        (f"pipeline/{CG}/s1", "pipeline", 60.0, 110.0),
        (f"pipeline/{CG}/s3", "pipeline", 90.0, 110.0),
        ("ultralytics_predict", "pipeline", 10.0, None),
        ("cudagraph/fp8/nhwc", "model_only", 999.0, None),  # failed its check: not counted
    ]
    return pd.DataFrame(
        [
            {
                "width": 1.0, "batch": 16, "variant": v, "scope": s,
                "status": "error" if "fp8" in v else "ok", "img_per_s": ips,
                "model_only_img_per_s": own, "candidates_per_frame": 150.0,
            }
            for v, s, ips, own in rows
        ]
    ).pipe(_timing)  # fmt: skip


def test_the_gap_is_the_product_of_its_two_factors():
    g = frames.pipeline_gap(_bench(200.0)).iloc[0]
    assert g.pipeline == f"pipeline/{CG}/s3" and g.own_engine == CG
    assert g.fastest_engine == "compile/fp16/nhwc" and g.fastest_img_per_s == 200.0
    assert g.pipeline_over_own == pytest.approx(90 / 110)
    assert g.own_over_fastest == pytest.approx(110 / 200)
    assert g.pipeline_over_fastest == pytest.approx(g.pipeline_over_own * g.own_over_fastest)


@pytest.mark.parametrize("target, over", [(0.85, True), (0.4, False)])
def test_the_stage_budget_is_the_batch_time_beyond_the_engine(target, over):
    """Batch 16 at 90 frames/s around an engine of 110 img/s: the stages cost
    16/90 - 16/110 s per batch; a pipeline at 0.85x the fastest 200 img/s would leave them less
    than nothing (the engine alone is too slow), at 0.4x it would leave them more than they
    take."""
    g = frames.stage_budget(frames.pipeline_gap(_bench(200.0)), target).iloc[0]
    assert g.stages_ms == pytest.approx(1e3 * (16 / 90 - 16 / 110))
    assert g.stages_allowed_ms == pytest.approx(1e3 * (16 / (target * 200) - 16 / 110))
    assert (g.stages_allowed_ms < 0) == (target == 0.85)
    assert (g.stages_over_ms > 0) == over
    assert g.stages_over_ms == pytest.approx(g.stages_ms - g.stages_allowed_ms)


def test_a_pipeline_mode_row_names_the_engine_it_wraps():
    """A faster row of another pipeline mode (``pipeline/<engine>/graph/s3``) is the unit's
    fastest pipeline, and its own engine is the engine, not the mode."""
    b = _bench(200.0)
    graph = b[b.variant == f"pipeline/{CG}/s3"].assign(variant=f"pipeline/{CG}/graph/s3")
    g = frames.pipeline_gap(pd.concat([b, graph.assign(img_per_s=105.0)])).iloc[0]
    assert g.pipeline == f"pipeline/{CG}/graph/s3" and g.own_engine == CG
    assert g.pipeline_over_own == pytest.approx(105 / 110)
    assert frames.pipeline_table(b.assign(pipeline_mode="full")).pipeline_mode.eq("full").all()


@pytest.mark.parametrize("compile_ips, verdict", [(200.0, HOLDS), (120.0, FAILS), (50.0, FAILS)])
def test_the_engine_cap_finding_flips(compile_ips, verdict):
    facts = facts_table(frames.gap_facts(frames.pipeline_gap(_bench(compile_ips))))
    v = evaluate(findings.GAP_RULES, facts).set_index("id").verdict
    # 110 / 200 = 0.55 caps the goal; 110 / 120 = 0.92 and the CUDA graph itself fastest do not
    assert v["fast_pipeline_engine_caps_goal_1"] == verdict


def test_the_shipped_bench_has_a_gap_row_per_pipeline_unit():
    bench = open_root("h200").load("bench_fast_engines")
    gap = frames.pipeline_gap(bench)
    pipe = bench[(bench.status == "ok") & bench.variant.str.startswith("pipeline/")]
    assert len(gap) == len(pipe.groupby(["width", "batch"]))
    assert (gap.pipeline_over_own <= 1.0).all() and (gap.own_over_fastest <= 1.0).all()


def _compiled_bench(pipeline_ips: float) -> pd.DataFrame:
    """The same unit measured by the compiled-pipeline bench: eager 100, compile 200 img/s,
    the pipeline around compile at ``pipeline_ips`` frames/s (its engine 195 alone), predict
    20."""
    rows = [
        ("eager/fp16/nhwc", "model_only", 100.0, None),
        ("compile/fp16/nhwc", "model_only", 200.0, None),
        ("pipeline/compile/fp16/nhwc/s3", "pipeline", pipeline_ips, 195.0),
        ("ultralytics_predict", "pipeline", 20.0, None),
    ]
    return pd.DataFrame(
        [
            {
                "width": 1.0, "batch": 16, "variant": v, "scope": s, "status": "ok",
                "img_per_s": ips, "model_only_img_per_s": own, "candidates_per_frame": 150.0,
            }
            for v, s, ips, own in rows
        ]
    ).pipe(_timing)  # fmt: skip


@pytest.mark.parametrize(
    "compiled_ips, dataset", [(80.0, "bench_fast_engines"), (180.0, "bench_pipeline")]
)
def test_goal_1_takes_the_closer_bench_per_unit(compiled_ips, dataset):
    """The CUDA-graph pipeline reaches 90 / 200 = 0.45 of its run's fastest engine; the compiled
    one 80 / 200 = 0.4 or 180 / 200 = 0.9: the closer one decides, with its own run's predict."""
    tables = {"bench_fast_engines": _bench(200.0), "bench_pipeline": _compiled_bench(compiled_ips)}
    best = frames.fastest_pipelines(tables)
    assert len(best) == 1 and best.dataset.item() == dataset
    f = facts_table(frames.pipeline_facts(tables)).set_index("key")
    row = f.loc["fast.pipeline_over_fastest_model_only"]
    assert tuple(row.datasets) == (dataset,)
    assert row.value == pytest.approx(max(90 / 200, compiled_ips / 200))
    predict = 10.0 if dataset == "bench_fast_engines" else 20.0
    assert f.loc["fast.pipeline_over_predict"].value == pytest.approx(
        best.frames_per_s.item() / predict
    )
    from yolo_sm.report import goals

    v = evaluate(goals.SPEED_RULES, f.reset_index()).set_index("id").verdict
    assert v["speed_1_w1_b16"] == (HOLDS if compiled_ips / 200 >= 0.85 else FAILS)


@pytest.mark.parametrize("compiled_ips, verdict", [(150.0, HOLDS), (170.0, FAILS)])
def test_the_stages_cap_finding_flips(compiled_ips, verdict):
    """Around its own engine (195 img/s) the compiled pipeline keeps 150 / 195 = 0.77 (under
    0.85: the stages cap the goal) or 170 / 195 = 0.87."""
    f = facts_table(frames.pipeline_facts({"bench_pipeline": _compiled_bench(compiled_ips)}))
    v = evaluate(findings.GAP_RULES, f).set_index("id").verdict
    assert v["fast_pipeline_stages_cap_goal_1"] == verdict


def test_no_pipeline_rows_give_no_pipeline_facts():
    bench = _bench(200.0)
    bench = bench[~bench.variant.str.startswith("pipeline/")]
    assert frames.fastest_pipelines({"bench_fast_engines": bench}).empty
    keys = {r["key"] for r in frames.pipeline_facts({"bench_fast_engines": bench})}
    assert keys == {"fast.pipeline_over_predict_median"} or not keys


def _modes_bench(graph_ips: float) -> pd.DataFrame:
    """The compiled-pipeline unit with the three pipeline modes: full at 150 (one stream) and
    160 frames/s (three), topk at 170, graph at ``graph_ips`` (three streams)."""
    b = _compiled_bench(160.0).assign(pipeline_mode=None)
    full = b.variant == "pipeline/compile/fp16/nhwc/s3"
    b.loc[full, "pipeline_mode"] = "full"
    extra = [
        ("pipeline/compile/fp16/nhwc/s1", "full", 150.0),
        ("pipeline/compile/fp16/nhwc/topk/s3", "topk", 170.0),
        ("pipeline/compile/fp16/nhwc/graph/s3", "graph", graph_ips),
    ]
    rows = [b[full].assign(variant=v, pipeline_mode=m, img_per_s=ips) for v, m, ips in extra]
    return pd.concat([b, *rows], ignore_index=True).pipe(_timing)


def test_the_mode_table_takes_each_modes_best_stream_count():
    m = frames.mode_table(_modes_bench(240.0)).iloc[0]
    assert (m.full, m.topk, m.graph) == (160.0, 170.0, 240.0)
    assert m.graph_over_full == pytest.approx(1.5) and m.topk_over_full == pytest.approx(170 / 160)
    # a table from before the modes: every pipeline row is the full NMS
    old = frames.mode_table(_compiled_bench(160.0))
    assert list(old.columns) == ["width", "batch", "full"] and not frames.mode_facts(
        {"bench_pipeline": _compiled_bench(160.0)}
    )


@pytest.mark.parametrize(
    "graph_ips, never_slower, speedup",
    [(240.0, HOLDS, HOLDS), (190.0, HOLDS, FAILS), (150.0, FAILS, FAILS)],
)
def test_the_graph_mode_findings_flip(graph_ips, never_slower, speedup):
    """graph / full = 1.5, 1.19 or 0.94: at least 1.0 in every unit, at least 1.3 median."""
    f = facts_table(frames.mode_facts({"bench_pipeline": _modes_bench(graph_ips)}))
    v = evaluate(findings.RULES, f).set_index("id").verdict
    assert v["fast_pipeline_graph_never_slower"] == never_slower
    assert v["fast_pipeline_graph_speedup"] == speedup


@pytest.mark.parametrize("compiled_ms, verdict", [(0.2, HOLDS), (0.6, FAILS)])
def test_the_compiled_stages_finding_flips(compiled_ms, verdict):
    """letterbox + decode: 1.0 ms eager against 2 x ``compiled_ms`` compiled."""
    stages = ["letterbox", "decode", "letterbox: compiled", "decode: compiled"]
    probe = pd.DataFrame(
        {"stage": stages, "wall_ms": 1.0, "gpu_ms": [0.6, 0.4, compiled_ms, compiled_ms]}
    )
    f = facts_table(frames.probe_facts({"p": probe})).set_index("key")
    assert f.loc["fast.probe_compiled_stages_over_eager"].value == pytest.approx(
        2 * compiled_ms / 1.0
    )
    v = evaluate(findings.RULES, f.reset_index()).set_index("id").verdict
    assert v["fast_probe_compiled_stages"] == verdict
    # a CPU probe has no GPU times: no fact
    keys = {r["key"] for r in frames.probe_facts({"p": probe.assign(gpu_ms=float("nan"))})}
    assert "fast.probe_compiled_stages_over_eager" not in keys


def _probe(engine_ms: float, one_stream_ms: float) -> pd.DataFrame:
    """A probe whose four other stages take 1 ms each and whose 3-stream batch takes 10 ms."""
    stages = ["h2d", "letterbox", "engine", "decode", "postprocess"]
    wall = [1.0, 1.0, engine_ms, 1.0, 1.0, one_stream_ms, 10.0]
    return pd.DataFrame(
        {
            "stage": [*stages, "batch, 1 stream", "batch, 3 streams"],
            "wall_ms": wall,
            "gpu_ms": wall,
        }
    )


@pytest.mark.parametrize(
    "second_engine_ms, verdict", [(6.0, HOLDS), (2.0, FAILS)]
)  # engine share: 60 % in the first probe; 60 % or 33 % in the second
def test_the_probe_findings_hold_for_every_probe_or_not_at_all(second_engine_ms, verdict):
    """Two probes: the engine-share fact is the smaller share of the two and the stream fact
    the smaller ratio; each names both probes; the verdict's datasets are those probes."""
    probes = {"p1": _probe(6.0, 20.0), "p2": _probe(second_engine_ms, 15.0)}
    f = facts_table(frames.probe_facts(probes))
    row = f.set_index("key").loc["fast.probe_engine_share_pct"]
    assert row.value == pytest.approx(min(60.0, second_engine_ms / (second_engine_ms + 4) * 100))
    assert tuple(row.datasets) == ("p1", "p2")
    assert f.set_index("key").loc["fast.probe_1_over_3_streams"].value == pytest.approx(1.5)
    v = evaluate(findings.RULES, f, "r").set_index("id")
    assert v.loc["fast_probe_engine_dominates", "verdict"] == verdict
    assert v.loc["fast_probe_engine_dominates", "datasets"] == "r/p1, r/p2"
    assert frames.probe_facts({}) == []

"""The article claims, the fast-engines targets and findings as rules: every rule flips across
its threshold, the claims' facts are the numbers of the data, the catalog's JSON has one object
per rule."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse.facts import concat, fact, facts_table, value
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.contract import hardware
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import catalog
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY, Rule, evaluate, topic_rules
from yolo_sm.topics.claims import analyse as ac
from yolo_sm.topics.claims import report as claims
from yolo_sm.topics.roofline import analyse as roofline
from yolo_sm.topics.width.analyse import flops_by_width

CLAIMS_RULES = topic_rules("claims")

ALL_RULES = CLAIMS_RULES + topic_rules("deploy")


@pytest.fixture(scope="module")
def h200():
    return open_root("h200")


@pytest.fixture(scope="module")
def claim_verdicts(h200):
    return claims.verdicts(h200).set_index("id")


def subset_root(tmp_path, names, source="h200"):
    """A root holding only ``names`` of ``source`` (files linked, manifest entries copied)."""
    src = open_root(source)
    folder = tmp_path / "subset"
    folder.mkdir()
    entries = {n: src.info(n) for n in names}
    for e in entries.values():
        (folder / e["file"]).symlink_to(src.path / e["file"])
    (folder / "manifest.json").write_text(json.dumps({"datasets": entries}))
    return open_root(folder)


def _verdict(rule: Rule, value: float) -> str:
    facts = facts_table([fact(rule.fact, value, rule.unit, scope=rule.scope)])
    return evaluate([rule], facts).verdict.item()


def _step(rule: Rule) -> float:
    return max(abs(rule.threshold), 1.0) * 1e-3


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_every_rule_flips_across_its_threshold(rule):
    up = rule.op in (">=", ">")
    eps = _step(rule)
    holds = rule.threshold + (eps if up else -eps)
    beyond = rule.partly if rule.partly is not None else rule.threshold
    fails = beyond - (eps if up else -eps)
    assert _verdict(rule, holds) == HOLDS
    assert _verdict(rule, fails) == FAILS
    if rule.partly is not None:
        between = (rule.threshold + rule.partly) / 2
        assert _verdict(rule, between) == PARTLY
    assert _verdict(rule, math.nan) == NOT_TESTED


def test_every_claim_is_a_rule_once():
    ids = [r.id for r in CLAIMS_RULES]
    parts = ["claim_3_w1.5", "claim_3_w1.7"]  # the width claim's second and third parts
    tail = [f"claim_{n}" for n in range(4, 11)] + ["claim_10_fp8"]  # fp8: its own row
    # claim 1 (FLOPs of width 1.25) is fixed by the model's structure: a table, not a rule
    assert ids == ["claim_2", "claim_3"] + parts + tail + [f"claim_{n}" for n in range(11, 17)]


@pytest.fixture(scope="module")
def topic(h200):
    return ac.topic_facts(h200)


def test_claims_read_topic_facts_and_add_only_their_own(h200, topic, claim_verdicts):
    own = ac.facts(h200, topic)
    assert own.key.str.startswith("claims.").all()
    every = catalog.facts(h200)  # concat raises if a (key, scope) pair came twice
    assert set(own.key) <= set(every.key)
    topic_keys = set(topic.key)
    assert not set(own.key) & topic_keys  # no key of a topic is computed again here
    # a claim reads a topic's fact (key and scope) wherever a topic computes the number
    shared = {r.id: (r.fact, r.scope) for r in CLAIMS_RULES if r.fact in topic_keys}
    assert shared == {
        "claim_3": ("achieved_occupancy_tw_pct_min", "width<=1.25"),
        "claim_3_w1.5": ("achieved_occupancy_tw_pct_distance_from_60", "width=1.5"),
        "claim_3_w1.7": ("layers_below_50_share_min", "width>1.7"),
        "claim_6": ("roofline.tensor_pipe_pct_below_60_occupancy", "width=1.0"),
        "claim_11": ("roofline.c2f_fusion_removed_launch_share", ""),
        "claim_16": ("roofline.nchw_time_vs_nhwc", "precision=fp16"),
    }
    for rid, (key, scope) in shared.items():
        assert claim_verdicts.measured[rid] == pytest.approx(value(topic, key, scope))
    # every other claim reads a claims.* fact
    rest = [r for r in CLAIMS_RULES if r.id not in shared]
    assert all(r.fact.startswith("claims.") for r in rest)


def test_one_rule_per_fact_in_the_catalog(h200):
    seen = {}
    for r in catalog.all_rules():
        assert (r.fact, r.scope) not in seen, (r.id, seen.get((r.fact, r.scope)))
        seen[(r.fact, r.scope)] = r.id
    # claim 6 is the one rule on tensor-pipe use below 60 % occupancy
    ids = [r.id for r in catalog.all_rules() if "tensor_pipe" in r.fact and "60" in r.fact]
    assert ids == ["claim_6"]


def test_claim_facts_on_the_shipped_data(h200, topic, claim_verdicts):
    f = ac.facts(h200, topic).set_index("key").value
    m = claim_verdicts.measured
    s = h200.load("sweep_fp16_nhwc")
    flops = s.groupby("width").flops_per_img.first()
    rise = claims.flops_table(h200).set_index("width").rise_from_w1_pct  # claim 1: a table
    assert rise[1.25] == pytest.approx((flops[1.25] / flops[1.0] - 1) * 100)
    assert "claims.flops_rise_w1.25_off_claim_pp" not in f
    # claim 8: the slope of eager peak memory against batch at width 1.0 (the batch topic's)
    e = s[(s.backend == "eager") & (s.width == 1.0) & (s.status == "ok")]
    slope = np.polyfit(e.batch, e.peak_mem_bytes, 1)[0]
    assert value(topic, "batch_memory_per_image_gb") == pytest.approx(slope / 1e9)
    assert f["claims.image_memory_off_claim"] == pytest.approx(1.2e9 / slope)
    # claims 2 and 3: the forward's time-weighted achieved occupancy per width
    occ = time_weighted(h200.load("ncu_width_b8"), "config")
    occ = occ.set_index(occ.config.str.extract(r"_w([\d.]+)_")[0].astype(float))
    occ = occ.achieved_occupancy_tw_pct
    assert f["claims.occupancy_drop_w1_to_w1.5_pp"] == pytest.approx(occ[1.0] - occ[1.5])
    assert m["claim_3"] == pytest.approx(occ[occ.index <= 1.25].min())
    assert m["claim_3_w1.5"] == pytest.approx(abs(occ[1.5] - 60))
    # claim 6: tensor-pipe use of the width-1.0 kernels below 60 % theoretical occupancy
    t = h200.load("ncu_throughput_w1")
    lo = t[(t.config == "yolov8_w1_fp16_nhwc_b8") & (t.theoretical_occupancy_pct < 60)]
    assert m["claim_6"] == pytest.approx(np.average(lo.tensor_pipe_pct, weights=lo.duration_us))
    # claim 11: launches one kernel per C2f block would remove, the most over widths
    tr = h200.load("trace_width_b8")
    tr = tr[tr.iteration == 0]
    removed = [
        (len(c2f) - c2f.layer.nunique()) / len(g)
        for _, g in tr.groupby("config")
        for c2f in [g[g.module_type == "C2f"]]
    ]
    assert m["claim_11"] == pytest.approx(max(removed))
    # claim 14: the weakest of the early stages' DRAM and the deep stages' SM throughput
    st = roofline.resnet_stages(h200.load("ncu_resnet101"), h200.load("model_layers"))
    st = st.set_index("layer")
    weakest = min(
        st.loc[list(roofline.EARLY)].dram_throughput_tw_pct.min(),
        st.loc[list(roofline.DEEP)].sm_throughput_tw_pct.min(),
    )
    assert m["claim_14"] == pytest.approx(weakest) and claim_verdicts.verdict["claim_14"] == FAILS
    # claim 16: fp16 GPU time per forward, NCHW over NHWC
    p = h200.load("ncu_precision_w1").groupby("config").duration_us.sum()
    assert m["claim_16"] == pytest.approx(p["yolov8_w1_fp16_nchw_b8"] / p["yolov8_w1_fp16_nhwc_b8"])
    # claim 15 reads SM throughput of the neck's conv layers, not occupancy
    t = h200.load("ncu_throughput_w1")
    neck = t[(t.stage == "neck") & (t.module_type == "Conv")]
    low = time_weighted(neck, ["config", "layer"], ("sm_throughput_pct",)).sm_throughput_tw_pct
    assert f["claims.neck_conv_sm_throughput_min_pct"] == pytest.approx(low.min())
    # claim 4: fp16 NHWC convolutions hold fewer blocks per SM (more shared memory per block)
    p = h200.load("ncu_precision_w1")
    (b32, s32), (b16, s16) = (
        ac.conv_blocks(p, f"yolov8_w1_{c}_b8") for c in ("fp32_nchw", "fp16_nhwc")
    )
    assert f["claims.conv_blocks_per_sm_fp16_nhwc_over_fp32_nchw"] == pytest.approx(b16 / b32)
    assert s16 > s32 and claim_verdicts.verdict["claim_4"] == FAILS
    # the copy of one frame: the ceilings' figure against 0.08 ms
    c = hardware.peak_rows(h200.load("ceilings"))  # the burst rows where the table has regimes
    ms = c[c.ceiling == "copy_h2d_frame_fp16"].value.item()
    assert f["claims.frame_copy_off_claim"] == pytest.approx(max(ms / 0.08, 0.08 / ms))


def test_claims_without_a_fact_are_not_tested(h200, claim_verdicts):
    v = claim_verdicts.verdict
    assert v["claim_9"] == NOT_TESTED  # no mAP evaluation
    assert v["claim_13"] == NOT_TESTED  # no open-loop pipeline rows in the bench
    decided = set(v[v != NOT_TESTED].index)
    assert decided == {r.id for r in CLAIMS_RULES} - {"claim_9", "claim_13"}


def test_a_root_without_the_datasets_tests_nothing(tmp_path):
    root = subset_root(tmp_path, ["ceilings"])
    v = claims.verdicts(root).set_index("id").verdict
    assert v["claim_12"] != NOT_TESTED
    assert (v.drop("claim_12") == NOT_TESTED).all()


def test_factor_off_is_symmetric():
    assert ac.factor_off(0.04, 0.08) == ac.factor_off(0.16, 0.08) == pytest.approx(2.0)
    assert math.isnan(ac.factor_off(0.0, 0.08))


def _topic(**values):
    """A facts table of topic facts: ``name=(value, scope)`` with ``__`` for ``.``."""
    return facts_table(
        fact(k.replace("__", "."), v, scope=sc, datasets=(k,)) for k, (v, sc) in values.items()
    )


def test_derived_facts_on_tiny_topic_tables():
    occ = facts_table(
        fact("achieved_occupancy_tw_pct", v, "%", scope=f"width={w:g}", datasets=("n",))
        for w, v in ((1.0, 90.0), (1.25, 88.0), (1.5, 60.0))
    )
    assert ac.occupancy_drop_pp(occ) == pytest.approx(30.0)
    assert math.isnan(ac.occupancy_drop_pp(occ, 1.0, 2.0))
    mem = _topic(batch_memory_per_image_gb=(0.6, ""))
    assert ac.image_memory_off(mem) == pytest.approx(2.0)
    resnet = _topic(
        roofline__resnet_early_min_dram_pct=(70.0, ""), roofline__resnet_deep_min_sm_pct=(65.0, "")
    )
    assert ac.resnet_weaker_bound(resnet) == pytest.approx(65.0)
    assert math.isnan(ac.resnet_weaker_bound(mem))
    rows = {r["key"]: r for r in ac.derived(concat(occ, mem, resnet))}
    assert rows["claims.resnet_weaker_bound_pct"]["value"] == pytest.approx(65.0)
    assert rows["claims.occupancy_drop_w1_to_w1.5_pp"]["datasets"] == ("n",)
    assert all(math.isnan(r["value"]) for r in ac.derived(facts_table([])))


def test_small_facts_on_tiny_tables():
    img = pd.Series([100.0, 180.0, 300.0, 250.0, 240.0], index=[1, 2, 4, 8, 16])
    assert ac.batch_over_best(img) == 1.0
    assert ac.batch_over_best(img.drop(4)) != ac.batch_over_best(img.drop(4))  # NaN
    assert ac.batch_gain(img, 1, 4) == pytest.approx(3.0)
    sweep = pd.DataFrame(
        {
            "status": ["ok"] * 4 + ["error"],
            "imgsz": [640] * 5,
            "width": [1.0, 1.0, 1.0, 1.25, 1.0],
            "backend": ["eager", "eager", "cudagraph", "eager", "eager"],
            "batch": [1, 2, 1, 1, 4],
            "img_per_s": [100.0, 150.0, 300.0, 90.0, 999.0],
            "flops_per_img": [8e9, 8e9, 8e9, 12.48e9, 8e9],
        }
    )
    assert ac.eager_img_per_s(sweep, 1.0).to_dict() == {1: 100.0, 2: 150.0}
    f = flops_by_width(sweep).set_index("width").flops_per_img
    assert f[1.25] / f[1.0] == pytest.approx(1.56)


def _pipe(streams, arrival, img, p50, p99):
    return {
        "width": 0.5,
        "batch": 16,
        "variant": f"pipeline/cudagraph/fp16/nhwc/s{streams}",
        "status": "ok",
        "streams": float(streams),
        "arrival_img_per_s": arrival,
        "img_per_s": img,
        "median_ms": p50,
        "p99_ms": p99,
    }


def test_jitter_counts_only_arrivals_below_capacity():
    closed = [_pipe(1, None, 1000.0, 10.0, 20.0), _pipe(3, None, 1500.0, 10.0, 20.0)]
    bench = pd.DataFrame(closed)
    assert math.isnan(ac.jitter_cut_below_capacity(bench))  # queueing only: not measured
    below = [_pipe(1, 500.0, 500.0, 10.0, 20.0), _pipe(3, 500.0, 500.0, 10.0, 14.0)]
    above = [_pipe(1, 2000.0, 1000.0, 10.0, 90.0), _pipe(3, 2000.0, 1500.0, 10.0, 11.0)]
    bench = pd.DataFrame(closed + below + above)
    assert ac.jitter_cut_below_capacity(bench) == pytest.approx(60.0)


def test_claim_10_reads_the_int8_cuda_graph_of_bench_8bit(tmp_path):
    root = subset_root(tmp_path, ["bench_8bit"])
    v = claims.verdicts(root).set_index("id")
    assert v.datasets["claim_10"] == "subset/bench_8bit"
    b = pd.read_parquet(open_root("h200").path / "bench_8bit.parquet")
    ok = b[(b.status == "ok") & (b.backend == "cudagraph") & (b.scope == "model_only")]
    ok = ok[(ok.batch == 64) & (ok.width >= 1)]
    img = ok.pivot_table(index="width", columns="precision", values="img_per_s")
    for p, rid in (("int8", "claim_10"), ("fp8", "claim_10_fp8")):
        ratio = (img[p] / img["fp16"]).dropna()
        assert v.measured[rid] == pytest.approx(ratio.min())
    assert v.verdict["claim_10"] == HOLDS and v.verdict["claim_10_fp8"] == FAILS


def test_claim_10_without_an_int8_engine_is_not_tested(tmp_path):
    root = subset_root(tmp_path, ["bench_fast_engines"])  # fp8 only: no stand-in for int8
    assert claims.verdicts(root).set_index("id").verdict["claim_10"] == NOT_TESTED


def test_catalog_json_has_one_object_per_rule(h200):
    rows = json.loads(catalog.to_json(catalog.verdict_table(h200)))
    ids = [r["id"] for r in rows]
    assert ids == [r.id for r in catalog.all_rules()] and len(ids) == len(set(ids))
    assert {r.id for r in ALL_RULES} <= set(ids)
    keys = {"id", "statement", "measured", "unit", "op", "threshold", "verdict", "datasets"}
    keys |= {"caveat"}
    assert all(set(r) == keys for r in rows)
    by_id = {r["id"]: r for r in rows}
    assert by_id["claim_9"]["measured"] is None and by_id["claim_9"]["verdict"] == NOT_TESTED
    assert by_id["claim_16"]["datasets"] == ["h200/ncu_precision_w1"]


def test_claim_1_is_a_table_and_says_what_it_lacks(tmp_path, h200):
    from yolo_sm.report.sections import Note

    empty = subset_root(tmp_path, [])
    note = claims.flops_table(empty)
    assert isinstance(note, Note) and empty.name in note
    t = claims.flops_table(h200).set_index("width")
    assert t.rise_from_w1_pct[1.0] == 0 and t.rise_from_w1_pct[1.25] > 50


def test_a_notebooks_verdict_table_shows_every_statement_whole():
    """pandas cuts a DataFrame's text at 50 characters when a notebook displays it; the verdict
    table a notebook shows is a Styler that keeps each statement whole, with its id, measured
    value and threshold."""
    from yolo_sm.report import rules

    long = "Batch 64, width 1: an 8-bit engine that passes its numerical check delivers 1.3x"
    rule = Rule(id="r_long", statement=long, fact="f", op=">=", threshold=1.3, unit="x")
    v = evaluate([rule], facts_table([fact("f", 1.13, "x")]))
    html = rules.table(v)._repr_html_()  # what the notebook shows
    assert long in html and "r_long" in html and "1.13x" in html and FAILS in html
    # the verdict in its badge's colours, the site's (one mapping for both)
    from yolo_sm.report.colors import VERDICT_COLORS
    from yolo_sm.report.site import SITE_STYLE

    bg, fg = VERDICT_COLORS[FAILS]
    assert f"background: {bg};" in html and f"color: {fg};" in html
    assert f".verdict-does-not-hold {{ background: {bg}; color: {fg}; }}" in SITE_STYLE
    assert set(VERDICT_COLORS) == set(rules.VERDICTS)  # a colour for every verdict
    assert rules.frame(v).loc["r_long", "statement"] == long


def test_a_notebooks_tables_show_their_text_whole():
    """After the notebooks' set-up, a DataFrame's long text (a pair of roots' statements, a list
    of GPUs) displays whole."""
    import pandas as pd

    from yolo_sm.report import plots

    long = "Time-weighted achieved occupancy rises by at least ten points from batch 1 to 64"
    before = pd.get_option("display.max_colwidth")
    try:
        pd.set_option("display.max_colwidth", 50)  # pandas' default
        assert long not in pd.DataFrame({"statement": [long]})._repr_html_()
        plots.setup_notebook()
        assert long in pd.DataFrame({"statement": [long]})._repr_html_()
    finally:
        pd.set_option("display.max_colwidth", before)

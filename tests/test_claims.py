"""The article claims, the fast-engines targets and findings as rules: every rule flips across
its threshold, the claims' facts are the numbers of the data, the catalog's JSON has one object
per rule."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse import claims as ac
from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import catalog, claims, goals
from yolo_sm.report.findings import fast as fast_findings
from yolo_sm.report.rules import FAILS, HOLDS, NOT_TESTED, PARTLY, Rule, evaluate

ALL_RULES = claims.CLAIMS_RULES + goals.RULES + fast_findings.RULES


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
    assert [r.id for r in claims.CLAIMS_RULES] == [f"claim_{n}" for n in range(1, 17)]
    assert all(r.fact.startswith("claims.") for r in claims.CLAIMS_RULES)


def test_claim_facts_on_the_shipped_data(h200, claim_verdicts):
    f = ac.facts(h200).set_index("key").value
    s = h200.load("sweep_fp16_nhwc")
    flops = s.groupby("width").flops_per_img.first()
    rise = (flops[1.25] / flops[1.0] - 1) * 100
    assert f["claims.flops_rise_w1.25_off_claim_pp"] == pytest.approx(abs(rise - 56.0))
    e = s[(s.backend == "eager") & (s.width == 1.0) & (s.status == "ok")]
    slope = np.polyfit(e.batch, e.peak_mem_bytes, 1)[0]
    assert f["claims.image_memory_off_claim"] == pytest.approx(1.2e9 / slope)
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
    c = h200.load("ceilings")
    ms = c[c.ceiling == "copy_h2d_frame_fp16"].value.item()
    assert f["claims.frame_copy_off_claim"] == pytest.approx(max(ms / 0.08, 0.08 / ms))


def test_claims_without_a_fact_are_not_tested(h200, claim_verdicts):
    v = claim_verdicts.verdict
    assert v["claim_9"] == NOT_TESTED  # no mAP evaluation
    assert v["claim_13"] == NOT_TESTED  # no open-loop pipeline rows in the bench
    assert ac.facts(h200).key.str.startswith("claims.int8").sum() == 0  # no INT8 engine ran
    decided = set(v[v != NOT_TESTED].index)
    assert decided == {f"claim_{n}" for n in range(1, 17)} - {"claim_9", "claim_13"}


def test_a_root_without_the_datasets_tests_nothing(tmp_path):
    root = subset_root(tmp_path, ["ceilings"])
    v = claims.verdicts(root).set_index("id").verdict
    assert v["claim_12"] != NOT_TESTED
    assert (v.drop("claim_12") == NOT_TESTED).all()
    assert (goals.verdicts(root).verdict == NOT_TESTED).all()


def test_factor_off_is_symmetric():
    assert ac.factor_off(0.04, 0.08) == ac.factor_off(0.16, 0.08) == pytest.approx(2.0)
    assert math.isnan(ac.factor_off(0.0, 0.08))


def test_small_facts_on_tiny_tables():
    occ = pd.Series([90.0, 88.0, 60.0], index=[1.0, 1.25, 1.5])
    assert ac.occupancy_drop_pp(occ) == pytest.approx(30.0)
    assert ac.min_occupancy_up_to(occ) == pytest.approx(88.0)
    img = pd.Series([100.0, 180.0, 300.0, 250.0, 240.0], index=[1, 2, 4, 8, 16])
    assert ac.batch_over_best(img) == 1.0
    assert ac.batch_over_best(img.drop(4)) != ac.batch_over_best(img.drop(4))  # NaN
    trace = pd.DataFrame(
        {
            "config": ["a"] * 5,
            "iteration": [0] * 5,
            "module_type": ["C2f", "C2f", "C2f", "Conv", "Conv"],
            "layer": ["m.2", "m.2", "m.2", "m.1", "m.3"],
        }
    )
    assert ac.c2f_fusion_bound(trace) == pytest.approx(2 / 5 * 100)
    ncu = pd.DataFrame(
        {
            "config": ["y_w1_fp16_nchw_b8", "y_w1_fp16_nhwc_b8"],
            "duration_us": [12.0, 10.0],
        }
    )
    assert ac.nhwc_speedup(ncu) == pytest.approx(1.2)


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


def test_claim_10_reads_fp8_from_the_bench(tmp_path):
    from tests.fixtures.synthetic_bench import make_bench, ship

    df = make_bench()
    ship(tmp_path, df)
    root = open_root(tmp_path / "h200")
    v = claims.verdicts(root).set_index("id")
    sp = ac.eight_bit_over_fp16(df, "fp8")
    assert v.measured["claim_10"] == pytest.approx(sp) and v.verdict["claim_10"] == HOLDS
    fp8 = df.variant == "cudagraph/fp8/nhwc"
    df.loc[fp8, ["status", "message", "img_per_s"]] = ["error", "NotAvailableError: no", None]
    ship(tmp_path, df)
    assert claims.verdicts(root).set_index("id").verdict["claim_10"] == NOT_TESTED


def test_catalog_json_has_one_object_per_rule(h200):
    rows = json.loads(catalog.to_json(catalog.verdict_table(h200)))
    ids = [r["id"] for r in rows]
    assert ids == [r.id for r in catalog.all_rules()] and len(ids) == len(set(ids))
    assert {r.id for r in ALL_RULES} <= set(ids)
    keys = {"id", "statement", "measured", "unit", "op", "threshold", "verdict", "datasets"}
    assert all(set(r) == keys for r in rows)
    by_id = {r["id"]: r for r in rows}
    assert by_id["claim_9"]["measured"] is None and by_id["claim_9"]["verdict"] == NOT_TESTED
    assert by_id["claim_16"]["datasets"] == ["h200/ncu_precision_w1"]


SECTIONS = (
    claims.occupancy_figure,
    claims.occupancy_vs_tensor_figure,
    claims.batch_figure,
    claims.memory_figure,
    claims.layout_figure,
)


@pytest.mark.parametrize("section", SECTIONS, ids=lambda f: f.__name__)
def test_sections_say_what_they_lack(section, tmp_path, h200):
    from yolo_sm.report.sections import Note

    empty = subset_root(tmp_path, [])
    note = section(empty)
    assert isinstance(note, Note) and empty.name in note
    assert not isinstance(section(h200), Note)

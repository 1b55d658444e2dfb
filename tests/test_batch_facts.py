"""Facts and rules of notebooks 03 (batch size) and 05 (SM timeline): facts checked numerically
on small tables and on the shipped root, every rule flips across its threshold, and a root
without a dataset leaves the rules that read it untested."""

import json
import math
import shutil

import pandas as pd
import pytest

from yolo_sm.analyse import gpm
from yolo_sm.analyse.facts import fact, facts_table, value
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import catalog, plots, rules
from yolo_sm.report.rules import topic_rules
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.batch import report as batch_sections
from yolo_sm.topics.timeline import analyse as timeline
from yolo_sm.topics.timeline import report as timeline_sections

ALL_RULES = topic_rules("batch") + topic_rules("timeline")


@pytest.fixture(scope="module")
def h200():
    return open_root("h200")


@pytest.fixture(scope="module")
def facts03(h200):
    return batch.facts(h200)


@pytest.fixture(scope="module")
def facts05(h200):
    return timeline.facts(h200)


def _row(width, backend, b, img_per_s, peak=None, build=None, imgsz=640):
    return {
        "status": "ok",
        "imgsz": imgsz,
        "width": width,
        "backend": backend,
        "batch": b,
        "img_per_s": img_per_s,
        "median_ms": 1000 * b / img_per_s,
        "peak_mem_bytes": peak,
        "build_peak_mem_bytes": build,
    }


def small_sweep():
    """Width 1.0 and 2.0, eager and CUDA graph, batch 1 / 8 / 32, with known answers."""
    eager = {1: 100.0, 8: 450.0, 32: 500.0}
    graph = {1: 200.0, 8: 480.0, 32: 505.0}
    rows = []
    for w, scale in ((1.0, 1.0), (2.0, 0.5)):
        for b in (1, 8, 32):
            peak = 1e9 * w + 5e7 * w * b
            rows.append(_row(w, "eager", b, scale * eager[b], peak, 2 * peak if b == 1 else peak))
            rows.append(_row(w, "cudagraph", b, scale * graph[b], 1e9 * w))
    return pd.DataFrame(rows)


def test_sweep_facts_of_a_small_table():
    t = batch.batch_table(small_sweep())
    f = facts_table(batch.sweep_facts(t, 100e9))
    assert value(f, "batch_gain_b1_to_best", "eager") == pytest.approx(5.0)
    # both widths reach 450 / 500 of their best at batch 8
    assert value(f, "batch_frac_of_best_at_b8", "widest") == pytest.approx(90.0)
    assert value(f, "batch_frac_of_best_at_b8", "narrowest") == pytest.approx(90.0)
    assert value(f, "batch_graph_speedup_b1_min") == pytest.approx(2.0)
    assert value(f, "batch_graph_speedup_from_b32_max") == pytest.approx(505 / 500)
    # memory at the reference width 1.0: 1 GB + 0.05 GB per image, a perfect line
    assert value(f, "batch_memory_per_image_gb") == pytest.approx(0.05)
    assert value(f, "batch_memory_fit_r2_min") == pytest.approx(1.0)
    # the knee (90 % of the best) is batch 8; the widest peaks there at 2 GB + 0.8 GB of 100 GB
    assert value(f, "batch_peak_mem_at_knee_pct") == pytest.approx(2.8)
    assert math.isnan(value(f, "batch_memory_1280_over_640"))  # no 1280 px rows


def test_sweep_facts_without_graphs_memory_or_640_px():
    """A CPU sweep: eager only, no peak memory, another image size."""
    d = small_sweep()
    d = d[d.backend == "eager"].assign(imgsz=320, peak_mem_bytes=None, build_peak_mem_bytes=None)
    f = facts_table(batch.sweep_facts(batch.batch_table(d)))
    assert set(f.key) == {"batch_gain_b1_to_best", "batch_frac_of_best_at_b8"}
    assert value(f, "batch_gain_b1_to_best", "eager") == pytest.approx(5.0)
    assert batch.ref_imgsz(d) == 320 and batch.ref_imgsz(small_sweep()) == 640


def test_memory_facts_at_1280_px():
    d = small_sweep()
    big = d[d.backend == "eager"].assign(imgsz=1280, peak_mem_bytes=lambda x: 4 * x.peak_mem_bytes)
    f = facts_table(batch.memory_facts(batch.batch_table(pd.concat([d, big])), 100e9))
    assert value(f, "batch_memory_1280_over_640") == pytest.approx(4.0)


def test_coverage_facts():
    cov = pd.DataFrame(
        {
            "batch": [16, 1, 4],
            "achieved_occupancy_tw_pct": [60.0, 30.0, 40.0],
            "theoretical_occupancy_tw_pct": [70.0, 64.0, 80.0],
        }
    )
    f = facts_table(batch.coverage_facts(cov))
    assert value(f, "batch_ncu_achieved_occupancy_rise") == pytest.approx(30.0)
    # over every batch, not the end points: 80 - 64
    assert value(f, "batch_ncu_theoretical_occupancy_range") == pytest.approx(16.0)
    assert batch.coverage_facts(cov.iloc[:1]) == []  # one batch: nothing to compare


def test_facts_of_the_shipped_root(h200, facts03):
    sweep = h200.load("sweep_fp16_nhwc")
    t = batch.batch_table(pd.concat([sweep, h200.load("sweep_1280")]))
    sat = batch.saturation(t).set_index(["imgsz", "width", "backend"])
    assert value(facts03, "batch_gain_b1_to_best", "eager") == pytest.approx(
        sat.loc[(640, 1.0, "eager"), "gain_b1_to_best"]
    )
    mem = float(sweep.prov_gpu_memory_bytes.iloc[0])
    budget = batch.memory_budget(batch.memory_fit(t), mem).set_index(["imgsz", "width", "backend"])
    w1 = budget.loc[(640, 1.0, "eager")]
    assert value(facts03, "batch_memory_per_image_gb") == pytest.approx(w1.per_image_MB / 1e3)


def test_timeline_facts_of_the_shipped_root(h200, facts05):
    gaps = timeline.launch_gaps(h200.load("trace_batch_w1"))
    per = gaps.groupby("batch").idle_frac.mean()
    assert value(facts05, "timeline_trace_idle_largest_pct") == pytest.approx(100 * per.iloc[-1])
    lvs = timeline.launch_vs_sweep(gaps, batch.batch_table(h200.load("sweep_fp16_nhwc")), 1.0)
    b1 = lvs.sort_values("batch").iloc[0]
    assert value(facts05, "timeline_sweep_idle_b1_pct") == pytest.approx(100 * b1.sweep_idle_frac)
    assert value(facts05, "timeline_graph_over_kernel_time_b1") == pytest.approx(
        b1.graph_over_kernel_time
    )
    over = gpm.gpm_overhead_table(h200.load("gpm_overhead"))
    assert value(facts05, "timeline_gpm_overhead_pct") == pytest.approx(
        over.throughput_lost_pct.max()
    )
    med = gpm.gpm_medians(h200.load("gpm_width_b16")).sort_values("width")
    assert value(facts05, "timeline_gpm_tensor_util_ratio_width") == pytest.approx(
        med.tensor_util_pct.iloc[-1] / med.tensor_util_pct.iloc[0]
    )


def test_every_rule_reads_a_fact_of_the_shipped_root(facts03, facts05):
    have = set(zip(facts03.key, facts03.scope, strict=True)) | set(
        zip(facts05.key, facts05.scope, strict=True)
    )
    missing = [r.id for r in ALL_RULES if (r.fact, r.scope) not in have]
    assert missing == []


def _verdict(rule, measured):
    f = facts_table([fact(rule.fact, measured, rule.unit, scope=rule.scope)])
    return rules.evaluate([rule], f).verdict.iloc[0]


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_rule_flips_across_its_threshold(rule):
    eps = max(abs(rule.threshold) * 1e-3, 1e-6)
    up = rule.op in (">=", ">")
    inside, outside = (rule.threshold + eps, rule.threshold - eps)[:: 1 if up else -1]
    assert _verdict(rule, inside) == rules.HOLDS
    if rule.partly is None:
        assert _verdict(rule, outside) == rules.FAILS
    else:
        assert _verdict(rule, outside) == rules.PARTLY
        beyond = rule.partly - eps if up else rule.partly + eps
        assert _verdict(rule, beyond) == rules.FAILS
    assert _verdict(rule, math.nan) == rules.NOT_TESTED


def test_verdicts_of_the_shipped_root(h200, facts03, facts05):
    v = rules.evaluate(ALL_RULES, pd.concat([facts03, facts05]), h200.name).set_index("id")
    assert not (v.verdict == rules.NOT_TESTED).any()
    assert v.verdict["batch_graph_wins_at_b1"] == rules.HOLDS
    assert v.verdict["timeline_graph_removes_gaps"] == rules.HOLDS
    assert v.datasets["batch_achieved_occupancy_rises"] == "h200/ncu_batch_w1"
    ids = {r.id for r in catalog.all_rules()}
    assert {r.id for r in ALL_RULES} <= ids


@pytest.fixture(scope="module")
def sweep_only(tmp_path_factory):
    """A root holding only the sweep and the trace (no Nsight Compute, GPM, 1280 px, pool)."""
    src = open_root("h200")
    root = tmp_path_factory.mktemp("roots") / "subset"
    root.mkdir()
    keep = {n: src.info(n) for n in ("sweep_fp16_nhwc", "trace_batch_w1")}
    for e in keep.values():
        shutil.copy(src.path / e["file"], root / e["file"])
    (root / "manifest.json").write_text(json.dumps({"datasets": keep}))
    return open_root(root)


def test_a_root_without_a_dataset_leaves_its_rules_untested(sweep_only):
    f = pd.concat([batch.facts(sweep_only), timeline.facts(sweep_only)])
    v = rules.evaluate(ALL_RULES, f, sweep_only.name).set_index("id").verdict
    for r in ALL_RULES:
        needs_absent = any(not sweep_only.has(d) for d in r.datasets)
        assert (v[r.id] == rules.NOT_TESTED) == needs_absent, r.id


def test_sections_say_in_one_line_what_a_root_lacks(sweep_only):
    for items in (
        batch_sections.coverage(sweep_only, "ncu_batch_w1"),
        batch_sections.gpm_by(sweep_only, "gpm_batch_w1"),
        timeline_sections.gpm_timeline(sweep_only, "gpm_width_b16", "width"),
    ):
        assert len(items) == 1 and isinstance(items[0], str) and "\n" not in items[0]
    assert "ncu_batch_w1" in plots.lacks(sweep_only, "ncu_batch_w1")
    # what the root holds renders: tables and figures, no sentence
    items = batch_sections.throughput(sweep_only, "sweep_fp16_nhwc", "sweep_1280")
    assert len(items) == 2 and not any(isinstance(i, str) for i in items)
    assert len(timeline_sections.gaps(sweep_only, "trace_batch_w1")) == 3

"""The headline rules of notebooks 03, 05 and 11, audited: each fact recomputed from a small
in-memory table (or the shipped one-model example) with plain pandas written here, checked
equal to the package's, then the table moved until the verdict flips."""

import pandas as pd
import pytest

from yolo_sm.analyse.facts import facts_table, value
from yolo_sm.contract.datasets import open_root
from yolo_sm.report.rules import FAILS, HOLDS, evaluate, topic_rules
from yolo_sm.topics.batch import TOPIC as BATCH
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.timeline import TOPIC as TIMELINE
from yolo_sm.topics.timeline import analyse as timeline
from yolo_sm.topics.your_model import TOPIC as YOUR_MODEL
from yolo_sm.topics.your_model import analyse as your_model


def verdict(rules, facts, rule_id):
    return evaluate(rules, facts).set_index("id").verdict[rule_id]


def sweep(b1=100.0, b8_wide=450.0, graph_b1=200.0, knee_peak=None):
    """Eager and graph at widths 0.5 / 1 / 2, batch 1 / 8 / 32 (img/s; latency from it)."""
    rows = []
    for w in (0.5, 1.0, 2.0):
        for b, eager, graph in ((1, b1, graph_b1), (8, 450.0, 480.0), (32, 500.0, 505.0)):
            if w == 2.0 and b == 8:
                eager = b8_wide
            peak = 1e9 + 5e7 * w * b if not (knee_peak and b == 8) else knee_peak
            for be, img in (("eager", eager), ("cudagraph", graph)):
                rows.append(
                    {
                        "status": "ok",
                        "imgsz": 640,
                        "width": w,
                        "backend": be,
                        "batch": b,
                        "img_per_s": img,
                        "median_ms": 1000 * b / img,
                        "peak_mem_bytes": peak,
                    }
                )
    return pd.DataFrame(rows)


def batch_facts(**kw):
    return facts_table(batch.sweep_facts(batch.batch_table(sweep(**kw)), 100e9))


def test_batch_headlines_are_the_ones_audited_here():
    assert set(BATCH.headlines["03_batch_sweep"]) == {
        "batch_pays",
        "batch_wide_saturates_by_b8",
        "batch_graph_wins_at_b1",
        "batch_memory_not_limiting",
    }


def test_batch_pays_recomputed_and_flipped():
    s = sweep()
    e = s[(s.backend == "eager") & (s.width == 1.0)]
    gain = e.img_per_s.max() / e.img_per_s[e.batch == 1].iloc[0]
    assert value(batch_facts(), "batch_gain_b1_to_best", "eager") == pytest.approx(gain)
    assert verdict(topic_rules("batch"), batch_facts(), "batch_pays") == HOLDS
    assert verdict(topic_rules("batch"), batch_facts(b1=400.0), "batch_pays") == FAILS


def test_batch_wide_saturates_recomputed_and_flipped():
    s = sweep()
    e = s[(s.backend == "eager") & (s.width == s.width.max())]
    share = 100 * e.img_per_s[e.batch == 8].iloc[0] / e.img_per_s.max()
    assert value(batch_facts(), "batch_frac_of_best_at_b8", "widest") == pytest.approx(share)
    assert verdict(topic_rules("batch"), batch_facts(), "batch_wide_saturates_by_b8") == HOLDS
    moved = batch_facts(b8_wide=300.0)
    assert verdict(topic_rules("batch"), moved, "batch_wide_saturates_by_b8") == FAILS


def test_batch_graph_wins_at_b1_recomputed_and_flipped():
    s = sweep()
    b1 = s[s.batch == 1].pivot_table(index="width", columns="backend", values="median_ms")
    lowest = (b1.eager / b1.cudagraph).min()
    assert value(batch_facts(), "batch_graph_speedup_b1_min") == pytest.approx(lowest)
    assert verdict(topic_rules("batch"), batch_facts(), "batch_graph_wins_at_b1") == HOLDS
    moved = batch_facts(graph_b1=101.0)
    assert verdict(topic_rules("batch"), moved, "batch_graph_wins_at_b1") == FAILS


def test_batch_memory_not_limiting_recomputed_and_flipped():
    s = sweep()
    e = s[s.backend == "eager"]
    best = e.groupby("width").img_per_s.transform("max")
    knee = e[e.img_per_s >= 0.9 * best].groupby("width").batch.min()
    at = e[e.batch == e.width.map(knee)]
    pct = 100 * at.peak_mem_bytes.max() / 100e9
    assert value(batch_facts(), "batch_peak_mem_at_knee_pct") == pytest.approx(pct)
    assert verdict(topic_rules("batch"), batch_facts(), "batch_memory_not_limiting") == HOLDS
    moved = batch_facts(knee_peak=95e9)
    assert verdict(topic_rules("batch"), moved, "batch_memory_not_limiting") == FAILS


def trace(kernel_us=10.0, gap_us=40.0):
    """Two forwards at width 1, batch 1 and 16: ten kernels each, ``gap_us`` apart at batch 1."""
    rows = []
    for b, gap in ((1, gap_us), (16, 1.0)):
        for it in (0, 1):
            for k in range(10):
                rows.append(
                    {
                        "config": f"yolov8_w1_fp16_nhwc_b{b}",
                        "iteration": it,
                        "start_us": k * (kernel_us + gap),
                        "duration_us": kernel_us,
                    }
                )
    return pd.DataFrame(rows)


def timed(eager_busy=0.1, graph_ms=0.12):
    """Batch 1 and 16 at width 1: eager 0.5 ms at batch 1, the graph ``graph_ms``."""
    rows = []
    for b, eager_ms in ((1, 0.5), (16, 2.0)):
        for be, ms, busy in (("eager", eager_ms, eager_busy), ("cudagraph", graph_ms, 0.1)):
            rows.append(
                {
                    "status": "ok",
                    "imgsz": 640,
                    "width": 1.0,
                    "backend": be,
                    "batch": b,
                    "median_ms": ms,
                    "img_per_s": 1000 * b / ms,
                    "gpu_busy_ms": busy,
                }
            )
    return batch.batch_table(pd.DataFrame(rows))


def gap_facts(**kw):
    return facts_table(timeline.gap_facts(trace(), timed(**kw), ["t", "s"]))


def test_timeline_headlines_are_the_ones_audited_here():
    assert set(TIMELINE.headlines["05_sm_timeline"]) == {
        "timeline_b1_idles_unprofiled",
        "timeline_graph_removes_gaps",
        "timeline_sm_occupancy_rises_with_batch",
    }


def test_timeline_b1_idles_unprofiled_recomputed_and_flipped():
    t = timed()
    e = t[(t.backend == "eager") & (t.batch == 1)].iloc[0]
    idle = 100 * (1 - e.gpu_busy_ms / e.median_ms)
    assert value(gap_facts(), "timeline_sweep_idle_b1_pct") == pytest.approx(idle)
    rules = topic_rules("timeline")
    assert verdict(rules, gap_facts(), "timeline_b1_idles_unprofiled") == HOLDS
    assert verdict(rules, gap_facts(eager_busy=0.49), "timeline_b1_idles_unprofiled") == FAILS


def test_timeline_graph_removes_gaps_recomputed_and_flipped():
    t = timed()
    g = t[(t.backend == "cudagraph") & (t.batch == 1)].iloc[0]
    assert value(gap_facts(), "timeline_graph_over_kernel_time_b1") == pytest.approx(
        g.median_ms / g.gpu_busy_ms
    )
    rules = topic_rules("timeline")
    assert verdict(rules, gap_facts(), "timeline_graph_removes_gaps") == HOLDS
    assert verdict(rules, gap_facts(graph_ms=0.2), "timeline_graph_removes_gaps") == FAILS


def test_timeline_sm_occupancy_ratio_reads_batch_1_recomputed_and_flipped():
    med = pd.DataFrame({"batch": [2, 1, 128], "sm_occupancy_pct": [9.0, 5.0, 40.0]})
    f = facts_table(
        timeline.gpm_ratio(
            "timeline_gpm_sm_occupancy_ratio_batch", med, "sm_occupancy_pct", "batch", 1
        )
    )
    ratio = med.set_index("batch").sm_occupancy_pct
    assert value(f, "timeline_gpm_sm_occupancy_ratio_batch") == ratio[128] / ratio[1]
    rule = "timeline_sm_occupancy_rises_with_batch"
    assert verdict(topic_rules("timeline"), f, rule) == HOLDS
    flat = med.assign(sm_occupancy_pct=[9.0, 30.0, 40.0])
    f = facts_table(
        timeline.gpm_ratio(
            "timeline_gpm_sm_occupancy_ratio_batch", flat, "sm_occupancy_pct", "batch", 1
        )
    )
    assert verdict(topic_rules("timeline"), f, rule) == FAILS
    # no batch 1 measured: nothing to state about batch 1
    assert timeline.gpm_ratio("k", med[med.batch > 1], "sm_occupancy_pct", "batch", 1) == []


@pytest.fixture(scope="module")
def example_ncu():
    return open_root("examples/yolov8n_calibrated").load("ncu_occupancy_b16")


def _model_facts(ncu):
    return facts_table(your_model.layer_facts(ncu))


def test_your_model_headlines_recomputed_and_flipped(example_ncu):
    assert set(YOUR_MODEL.headlines["11_your_model"]) == {
        "your_model_half_idle_warps",
        "your_model_low_layers_dominate",
    }
    k = example_ncu[example_ncu.layer.astype(str) != ""]
    w = k.achieved_occupancy_pct * k.duration_us
    forward = w.sum() / k.duration_us.sum()
    per_layer = w.groupby(k.layer).sum() / k.duration_us.groupby(k.layer).sum()
    time = k.duration_us.groupby(k.layer).sum()
    below = 100 * time[per_layer < 50].sum() / time.sum()
    f = _model_facts(example_ncu)
    p = your_model.PREFIX
    assert value(f, p + "achieved_occupancy_tw_pct") == pytest.approx(forward)
    assert value(f, p + "time_share_below_50_pct") == pytest.approx(below)
    rules = topic_rules("your_model")
    busy = _model_facts(example_ncu.assign(achieved_occupancy_pct=30.0))
    idle = _model_facts(example_ncu.assign(achieved_occupancy_pct=90.0))
    assert verdict(rules, busy, "your_model_half_idle_warps") == HOLDS
    assert verdict(rules, idle, "your_model_half_idle_warps") == FAILS
    assert verdict(rules, busy, "your_model_low_layers_dominate") == HOLDS
    assert verdict(rules, idle, "your_model_low_layers_dominate") == FAILS


def test_your_model_rules_load_checked():
    from yolo_sm.report import catalog

    ids = {r.id for r in catalog.all_rules()}
    assert {r.id for r in topic_rules("your_model")} <= ids
    with pytest.raises(ValueError, match="no facts function"):
        from dataclasses import replace

        from yolo_sm.report.rules import validate

        bad = replace(topic_rules("your_model")[0], fact="your_model.nope")
        validate([bad], your_model.FACT_KEYS, ())

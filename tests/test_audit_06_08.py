"""The audit of notebooks 06-08's rules: each fact recomputed with plain pandas written here (none
of yolo_sm's analysis functions) from a slice of the H200 tables under
``tests/fixtures/root_06_08``, and each verdict flipped by moving its fact across the threshold."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse.facts import concat, fact, facts_table
from yolo_sm.contract.datasets import open_root
from yolo_sm.report.rules import FAILS, HOLDS, evaluate, topic_rules
from yolo_sm.topics.launches import analyse as hosts
from yolo_sm.topics.memory import analyse as memory
from yolo_sm.topics.roofline import analyse as roofline

FIXTURE = Path(__file__).parent / "fixtures" / "root_06_08"
RULES = topic_rules("roofline") + topic_rules("memory") + topic_rules("launches")


def _read(name):
    return pd.read_parquet(FIXTURE / f"{name}.parquet")


def _roof():
    """Layer, FLOPs, min bytes, time and the ceilings of YOLOv8 w1 fp16 b8, plainly."""
    k = _read("ncu_width_b8").groupby("layer").duration_us.sum().rename("us")
    m = _read("model_layers")
    m = m[m.max_channels == 2048].set_index("layer")
    b = 8 / m.batch  # the model table counts one image at its own element size (fp16)
    moved = m.weight_bytes + (m.in_bytes + m.out_bytes) * b
    t = pd.DataFrame({"type": m.module_type, "flops": m.flops * 8, "bytes": moved}).join(k)
    c = _read("ceilings")
    c = c[c.regime == "burst"].set_index("ceiling").value
    return t, c["matmul_fp16"], c["copy_d2d"]


def _pct_of_roof():
    t, pk, bw = _roof()
    f = t[t.flops > 0]
    roof = np.minimum(pk, f.flops / f.bytes * bw / 1e3)
    pct = 100 * f.flops / (f.us * 1e-6) / 1e12 / roof
    return (pct * f.us).sum() / f.us.sum()


def _compute_side():
    t, pk, bw = _roof()
    return t.us[t.flops / t.bytes >= pk * 1e3 / bw].sum() / t.us.sum()


def _zero_flop():
    t, _, bw = _roof()
    z = t[t.flops == 0]
    return (100 * z.bytes / (z.us * 1e-6) / 1e9 / bw).max()


def _upsample():
    t, _, _ = _roof()
    gbps = (t.bytes / t.us).groupby(t.type).median()
    return gbps["Upsample"] / gbps["Concat"]


def _wide_rise():
    w = _read("ncu_wide_stack")
    tw = w.groupby(["config", "stage"]).apply(
        lambda g: (g.tensor_pipe_pct * g.duration_us).sum() / g.duration_us.sum()
    )
    return tw.xs("stage3", level="stage").mean() - tw.xs("stage0", level="stage").mean()


def _nchw():
    k = _read("ncu_precision_w1")
    k = k[k.config.str.contains("_fp16_nchw_")]
    tr = k.kernel_name.str.contains("nchwToNhwc|nhwcToNchw")
    return k.duration_us[tr].sum() / k.duration_us.sum()


def _peak_error():
    life = _read("memory_lifetimes")
    out = []
    for _, g in life.groupby(["model", "width"]):
        m = g[g.level == "model"].iloc[0]
        t = g[g.level == "tensor"]
        steps = np.arange(t.held_until_step.max() + 1)
        live = [
            t.out_bytes[(t.created_at_step <= s) & (t.held_until_step >= s)].sum() for s in steps
        ]
        measured = m.measured_peak_bytes - m.resident_bytes
        out.append(100 * abs(max(live) / measured - 1))
    return max(out)


def _pool(col):
    p = _read("memory_pool")
    if col == "img_per_s":
        p = p[~p.first_of_batch]
        v = 1e3 * p.groupby("alloc_conf").batch.sum() / p.groupby("alloc_conf").latency_ms.sum()
    else:
        v = p.groupby("alloc_conf").peak_reserved_bytes.max()
    return v["expandable_segments:True"] / v["default"]


def _eager(batch):
    s = _read("sweep_fp16_nhwc")
    return s[(s.status == "ok") & (s.backend == "eager") & (s.batch == batch)].set_index("width")


def _narrow_idle():
    e = _eager(8).loc[0.25]
    return 1 - e.gpu_busy_ms / e.median_ms


def _compile_vs_bound():
    e, c = _read("trace_fp8_w1_b64"), _read("trace_compile_w1_b64")
    c2f = e[e.module_type == "C2f"]
    bound = (len(c2f) - c2f.layer.nunique()) / len(e)
    return (1 - len(c) / len(e)) - bound


def _graph_idle():
    s = _read("sweep_fp16_nhwc")
    g = s[(s.status == "ok") & (s.backend == "cudagraph")]
    return 100 * (1 - (g.gpu_busy_ms / g.median_ms).clip(upper=1)).max()


RECOMPUTED = {
    "roofline_yolo_under_roof": _pct_of_roof,
    "roofline_yolo_compute_side": _compute_side,
    "roofline_zero_flop_below_copy": _zero_flop,
    "roofline_upsample_slow": _upsample,
    "roofline_wide_tensor_pipe_rises": _wide_rise,
    "roofline_nchw_transforms": _nchw,
    "memory_peak_predicted": _peak_error,
    "memory_expandable_lowers_peak": lambda: _pool("peak_reserved_bytes"),
    "memory_expandable_same_speed": lambda: _pool("img_per_s"),
    "roofline_narrow_eager_idles": _narrow_idle,
    "roofline_compile_below_c2f_bound": _compile_vs_bound,
    "hosts_eager_small_batch_host_bound": lambda: 100 * _eager(1).host_bound.mean(),
    "hosts_eager_small_batch_cpu_time": lambda: (
        _eager(1).host_cpu_ms / _eager(1).mean_ms
    ).median(),
    "hosts_graph_keeps_gpu_busy": _graph_idle,
}


@pytest.fixture(scope="module")
def verdicts():
    root = open_root(FIXTURE)
    facts = concat(roofline.facts(root), memory.facts(root), hosts.facts(root))
    return evaluate(RULES, facts).set_index("id")


def test_every_rule_of_06_to_08_is_recomputed():
    assert set(RECOMPUTED) == {r.id for r in RULES}


@pytest.mark.parametrize("rule_id", sorted(RECOMPUTED))
def test_each_fact_is_what_plain_pandas_computes(rule_id, verdicts):
    assert verdicts.measured[rule_id] == pytest.approx(RECOMPUTED[rule_id](), rel=1e-9)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_each_verdict_flips_across_its_threshold(rule):
    eps = max(abs(rule.threshold), 1.0) * 1e-3
    up = rule.op in (">=", ">")
    loose = rule.partly if rule.partly is not None else rule.threshold
    for v, want in (
        (rule.threshold + (eps if up else -eps), HOLDS),
        (loose - (eps if up else -eps), FAILS),
    ):
        f = facts_table([fact(rule.fact, v, rule.unit, scope=rule.scope)])
        assert evaluate([rule], f).verdict.item() == want


def test_a_share_stays_a_share_and_a_ratio_is_named_one(verdicts):
    # the host's CPU time over the forward is a ratio of means (above 1 where the loop's own
    # work between forwards counts), never a share above 100 %
    for r in RULES:
        if r.unit == "%":
            assert verdicts.measured[r.id] <= 100, r.id
    assert next(r for r in RULES if r.id == "hosts_eager_small_batch_cpu_time").unit == "x"

"""The audit of notebook 02's headline rules and of the articles' claims (09) that read the
claims' own facts: each fact recomputed with plain pandas written here (none of yolo_sm's
analysis functions) from a small subset of the h200 root (tests/fixtures/precision_h200),
compared with the package's; each verdict flipped by moving its fact across the threshold."""

from pathlib import Path

import pandas as pd
import pytest

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.vocab import TOLERANCE, Precision
from yolo_sm.report.rules import FAILS, HOLDS, check_unique, evaluate, topic_rules
from yolo_sm.topics.claims import analyse as claims_analyse
from yolo_sm.topics.precision import TOPIC
from yolo_sm.topics.precision import analyse as precision_analyse

CLAIMS = topic_rules("claims")
PRECISION = topic_rules("precision")

FIX = Path(__file__).parent / "fixtures" / "precision_h200"


def _ok(name: str) -> pd.DataFrame:
    d = pd.read_parquet(FIX / f"{name}.parquet")
    return d[d.status == "ok"]


def _over_fp32(backend: str, batch: int, agg: str):
    p = _ok("sweep_precision_core")
    p = p[(p.backend == backend) & (p.batch == batch)]
    t = p.pivot_table(index="width", columns="precision", values="median_ms")
    return getattr(t.fp32 / t.fp16, agg)()


def _bf16_dev():
    s = _ok("sweep_bf16_nhwc")
    t = s.pivot_table(index=["width", "batch", "backend"], columns="precision", values="median_ms")
    return 100 * abs((t.fp16 / t.bf16).median() - 1)


def _simt_fp32():
    k = pd.read_parquet(FIX / "ncu_precision_w1.parquet")
    k = k[k.config == "yolov8_w1_fp32_nchw_b8"]
    simt = k.kernel_name.str.contains("f32f32_f32f32|convolve_sgemm|sgemm")
    return 100 * k.duration_us[simt].sum() / k.duration_us.sum()


def _numerics():
    n = pd.read_parquet(FIX / "numerics.parquet")
    n = n[(n["input"] == "random") & ~n.class_prior.astype(bool)]
    tol = n.precision.map(lambda p: TOLERANCE[Precision(p)])
    return (n.groupby("precision").rel_err.max() / tol.groupby(n.precision).first()).max()


def _conv_blocks():
    k = pd.read_parquet(FIX / "ncu_precision_w1.parquet")
    mm = k.kernel_name.str.contains("fprop|convolve|gemm|nvjet", case=False)
    k = k[mm].assign(blocks=k[["limit_warps", "limit_blocks", "limit_registers",
                               "limit_shared_mem"]].min(axis=1))  # fmt: skip
    tw = k.groupby("config").apply(lambda g: (g.blocks * g.duration_us).sum() / g.duration_us.sum())
    return tw["yolov8_w1_fp16_nhwc_b8"] / tw["yolov8_w1_fp32_nchw_b8"]


def _eager(width: float) -> pd.Series:
    s = _ok("sweep_fp16_nhwc")
    return s[(s.backend == "eager") & (s.width == width)].set_index("batch").img_per_s


def _eight_bit(precision: str):
    b = _ok("bench_8bit")
    b = b[(b.backend == "cudagraph") & (b.scope == "model_only") & (b.batch == 64) & (b.width >= 1)]
    img = b.pivot_table(index="width", columns="precision", values="img_per_s")
    return (img[precision] / img.fp16).dropna().min()


def _frame_copy():
    c = pd.read_parquet(FIX / "ceilings.parquet")
    ms = c[(c.ceiling == "copy_h2d_frame_fp16") & (c.regime == "burst")].median_ms.iloc[0]
    return max(ms / 0.08, 0.08 / ms)


def _neck_sm():
    k = pd.read_parquet(FIX / "ncu_throughput_w1.parquet")
    k = k[(k.stage == "neck") & (k.module_type == "Conv")]
    w = k.assign(x=k.sm_throughput_pct * k.duration_us).groupby(["config", "layer"])
    return (w.x.sum() / w.duration_us.sum()).min()


#: rule id -> its fact recomputed from the fixture with plain pandas
RECOMPUTED = {
    "precision_fp16_faster_large_batch": lambda: _over_fp32("cudagraph", 64, "min"),
    "precision_fp16_hidden_by_launches": lambda: _over_fp32("eager", 1, "median"),
    "precision_bf16_as_fast_as_fp16": _bf16_dev,
    "precision_fp32_on_simt": _simt_fp32,
    "precision_numerics_within_tolerance": _numerics,
    "claim_4": _conv_blocks,
    "claim_5": lambda: _eager(1.0)[4] / _eager(1.0)[[1, 2, 4, 8, 16]].max(),
    "claim_7": lambda: _eager(0.5)[32] / _eager(0.5)[1],
    "claim_10": lambda: _eight_bit("int8"),
    "claim_10_fp8": lambda: _eight_bit("fp8"),
    "claim_12": _frame_copy,
    "claim_15": _neck_sm,
}


@pytest.fixture(scope="module")
def verdicts():
    root = open_root(FIX)
    empty = facts_table([])  # the claims' own facts only: no topic's facts on this subset
    facts = pd.concat([precision_analyse.facts(root), claims_analyse.facts(root, empty)])
    return evaluate(PRECISION + CLAIMS, facts.reset_index(drop=True), root.name).set_index("id")


def test_every_headline_of_02_is_audited():
    assert set(TOPIC.headlines["02_precision"]) <= set(RECOMPUTED)


@pytest.mark.parametrize("rule_id", sorted(RECOMPUTED))
def test_each_fact_is_what_plain_pandas_computes(rule_id, verdicts):
    assert verdicts.measured[rule_id] == pytest.approx(RECOMPUTED[rule_id](), rel=1e-9)


@pytest.mark.parametrize("rule", PRECISION + CLAIMS, ids=lambda r: r.id)
def test_each_verdict_flips_when_its_fact_crosses_the_threshold(rule):
    eps = max(abs(rule.threshold), 1.0) * 1e-3
    up = rule.op in (">=", ">")
    loose = rule.partly if rule.partly is not None else rule.threshold
    for verdict, v in ((HOLDS, rule.threshold + (eps if up else -eps)),
                       (FAILS, loose - (eps if up else -eps))):  # fmt: skip
        f = facts_table([fact(rule.fact, v, rule.unit, scope=rule.scope)])
        assert evaluate([rule], f).verdict.item() == verdict


def test_no_two_rules_share_a_fact_and_comparison():
    check_unique(PRECISION + CLAIMS)
    keys = [(r.fact, r.scope, r.op) for r in PRECISION + CLAIMS]
    assert len(keys) == len(set(keys))


def test_the_8bit_answer_reads_the_int8_engine_and_states_its_clocks(verdicts):
    """claim_10 is decided on the INT8 engine's CUDA graph against fp16's of the same bench;
    its note states each width's clock spread, and a spread over the share is a caveat."""
    f = claims_analyse.eight_bit_fact(_ok("bench_8bit"), "int8", "bench_8bit")
    assert f["value"] == pytest.approx(_eight_bit("int8"))
    assert "apart" in f["note"] and verdicts.caveat["claim_10"] == ""
    b = pd.read_parquet(FIX / "bench_8bit.parquet")
    hot = b.assign(sm_clock_mhz=b.precision.map({"int8": 1980.0, "fp16": 1500.0}))
    far = claims_analyse.eight_bit_fact(hot[hot.status == "ok"], "int8", "bench_8bit")
    assert far["clock_spread_pct"] == pytest.approx(100 * 480 / 1980)
    v = evaluate([r for r in CLAIMS if r.id == "claim_10"], facts_table([far]))
    assert "apart" in v.caveat.item()

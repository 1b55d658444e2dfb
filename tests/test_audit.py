"""The audit of every article claim and page headline: each fact recomputed from the shipped
h200 tables with plain pandas written here (none of yolo_sm's analysis functions), each verdict
flipped by moving its fact across the threshold, and the rule loader's checks."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import data_dir, open_root
from yolo_sm.report import catalog
from yolo_sm.report.rules import (
    FAILS,
    HOLDS,
    NOT_TESTED,
    Rule,
    evaluate,
    load,
    topic_rules,
    validate,
)


def _read(name: str) -> pd.DataFrame:
    return pd.read_parquet(data_dir() / "h200" / f"{name}.parquet")


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.status == "ok"]


def _tw(g: pd.DataFrame, col: str = "achieved_occupancy_pct") -> float:
    return float((g[col] * g.duration_us).sum() / g.duration_us.sum())


def _width(config: pd.Series) -> pd.Series:
    return config.str.extract(r"_w([0-9.]+)_")[0].astype(float)


def _sweep() -> pd.DataFrame:
    return _ok(_read("sweep_fp16_nhwc"))


def _eager(width: float) -> pd.Series:
    s = _sweep()
    return s[(s.backend == "eager") & (s.width == width)].set_index("batch").img_per_s


def _occupancy_by_width() -> pd.Series:
    k = _read("ncu_width_b8").assign(width=lambda d: _width(d.config))
    return k.groupby("width").apply(_tw)


def _claim_3_w17():
    k = _read("ncu_width_b8").assign(width=lambda d: _width(d.config))
    k = k[k.width > 1.7]
    lay = k.groupby(["width", "layer"]).apply(_tw).rename("occ").reset_index()
    return lay.groupby("width").occ.apply(lambda o: 100 * (o < 50).mean()).min()


def _claim_12():
    c = _read("ceilings")
    c = c[(c.ceiling == "copy_h2d_frame_fp16") & (c.regime == "burst")]
    ms = float(c.median_ms.iloc[0])
    return max(ms / 0.08, 0.08 / ms)


def _claim_16():
    t = _read("ncu_precision_w1").groupby("config").duration_us.sum()
    pick = {c.split("_")[2] + "_" + c.split("_")[3]: v for c, v in t.items()}
    return pick["fp16_nchw"] / pick["fp16_nhwc"]


def _eight_bit(precision: str):
    b = _read("bench_8bit")
    b = _ok(b)
    b = b[(b.backend == "cudagraph") & (b.scope == "model_only") & (b.batch == 64)]
    img = b[b.width >= 1].pivot_table(index="width", columns="precision", values="img_per_s")
    return (img[precision] / img["fp16"]).dropna().min()


def _graph_widest_over_narrowest(col: str, batch: int = 8):
    s = _sweep()
    g = s[(s.backend == "cudagraph") & (s.batch == batch)].set_index("width").sort_index()
    return g[col].iloc[-1] / g[col].iloc[0]


def _precision_at(backend: str, batch_of, agg: str):
    p = _ok(_read("sweep_precision_core"))
    p = p[(p.backend == backend) & (p.batch == batch_of(p.batch))]
    t = p.pivot_table(index="width", columns="precision", values="img_per_s")
    return getattr(t.fp16 / t.fp32, agg)()


def _graph_over_eager_b1():
    s = _sweep()
    t = s[s.batch == 1].pivot_table(index="width", columns="backend", values="median_ms")
    return (t.eager / t.cudagraph).min()


def _grid_limited_smallest_batch():
    k = _read("ncu_batch_w1")
    k = k[k.config.str.endswith("_b1")]
    return 100 * k.duration_us[k.waves_per_sm < 1].sum() / k.duration_us.sum()


def _tc_resources_over_widths():
    k = _read("ncu_width_b8").assign(width=lambda d: _width(d.config))
    k = k[k.kernel_name.str.contains("xmma|gemm|cutlass", case=False)]  # tensor-core kernels
    res = k[["limit_registers", "limit_shared_mem"]].min(axis=1)
    k["res"] = res < k[["limit_warps", "limit_blocks"]].min(axis=1)
    return (
        k.groupby("width")
        .apply(lambda g: 100 * g.duration_us[g.res].sum() / g.duration_us.sum())
        .min()
    )


def _eager_b1() -> pd.DataFrame:
    s = _sweep()
    return s[(s.backend == "eager") & (s.batch == 1)].set_index("width")


#: rule id -> its fact recomputed from the raw tables with plain pandas
RECOMPUTED = {
    "claim_2": lambda: _occupancy_by_width()[1.0] - _occupancy_by_width()[1.5],
    "claim_3": lambda: _occupancy_by_width().loc[:1.25].min(),
    "claim_3_w1.5": lambda: abs(_occupancy_by_width()[1.5] - 60.0),
    "claim_3_w1.7": _claim_3_w17,
    "claim_5": lambda: _eager(1.0)[4] / _eager(1.0)[[1, 2, 4, 8, 16]].max(),
    "claim_7": lambda: _eager(0.5)[32] / _eager(0.5)[1],
    "claim_10": lambda: _eight_bit("int8"),
    "claim_10_fp8": lambda: _eight_bit("fp8"),
    "claim_12": _claim_12,
    "claim_16": _claim_16,
    "width_wider_slower_per_image": lambda: _graph_widest_over_narrowest("img_per_s"),
    "width_wider_slower_than_flops": lambda: _graph_widest_over_narrowest("tflops"),
    "width_wider_lower_occupancy": lambda: (
        _occupancy_by_width().iloc[-1] - _occupancy_by_width().iloc[0]
    ),
    "precision_fp16_faster_large_batch": lambda: _precision_at("cudagraph", max, "min"),
    "precision_fp16_hidden_by_launches": lambda: _precision_at("eager", min, "median"),
    "batch_pays": lambda: _eager(1.0).max() / _eager(1.0)[1],
    "batch_wide_saturates_by_b8": lambda: 100 * _eager(2.0)[8] / _eager(2.0).max(),
    "batch_narrow_needs_more": lambda: 100 * _eager(0.25)[8] / _eager(0.25).max(),
    "batch_graph_wins_at_b1": _graph_over_eager_b1,
    "heatmaps_small_batch_grid_limited": _grid_limited_smallest_batch,
    "heatmaps_resources_cap_tensor_cores": _tc_resources_over_widths,
    "timeline_b1_idles_unprofiled": lambda: (
        100 * (1 - _eager_b1().gpu_busy_ms / _eager_b1().median_ms)[1.0]
    ),
    "hosts_eager_small_batch_host_bound": lambda: 100 * _eager_b1().host_bound.astype(bool).mean(),
    "hosts_eager_small_batch_cpu_time": lambda: (
        _eager_b1().host_cpu_ms / _eager_b1().mean_ms
    ).median(),
}


@pytest.fixture(scope="module")
def h200_verdicts():
    return catalog.verdict_table(open_root("h200")).set_index("id")


@pytest.mark.parametrize("rule_id", sorted(RECOMPUTED))
def test_each_fact_is_what_plain_pandas_computes(rule_id, h200_verdicts):
    assert h200_verdicts.measured[rule_id] == pytest.approx(RECOMPUTED[rule_id](), rel=1e-9)


RULES = catalog.all_rules()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_each_verdict_flips_when_its_fact_crosses_the_threshold(rule):
    eps = max(abs(rule.threshold), 1.0) * 1e-3
    up = rule.op in (">=", ">")
    at = {HOLDS: rule.threshold + (eps if up else -eps)}
    loose = rule.partly if rule.partly is not None else rule.threshold
    at[FAILS] = loose - (eps if up else -eps)
    for verdict, v in at.items():
        f = facts_table([fact(rule.fact, v, rule.unit, scope=rule.scope)])
        assert evaluate([rule], f).verdict.item() == verdict


def test_one_rule_per_fact_and_comparison():
    keys = [(r.fact, r.scope, r.op) for r in RULES]
    assert len(keys) == len(set(keys))


def test_a_rule_naming_an_unknown_fact_dataset_or_unit_fails_to_load(monkeypatch, tmp_path):
    good = next(r for r in RULES if r.id == "claim_10")
    known = catalog.known_facts()
    names = {d for r in RULES for d in r.datasets}
    validate([good], known, names)
    with pytest.raises(ValueError, match="claims.int8_over_fp16_cudagraph_b64_mni"):
        validate([replace(good, fact="claims.int8_over_fp16_cudagraph_b64_mni")], known, names)
    with pytest.raises(ValueError, match="bench_8bti"):
        validate([replace(good, datasets=("bench_8bti",))], known, names)
    with pytest.raises(ValueError, match="unit"):
        replace(good, unit="xx")
    twin = replace(good, id="claim_10_again")
    with pytest.raises(ValueError, match="both decide"):
        validate([good, twin], known, names)
    # a misspelt fact in a rules file fails when the catalog loads its rules
    typo = tmp_path / "rules.toml"
    typo.write_text(_GOOD.replace('fact = "f"', 'fact = "claims.int8_over_fp16_typo"'))
    monkeypatch.setattr(catalog, "SOURCES", [*catalog.SOURCES, (load(typo), catalog.SOURCES[0][1])])
    with pytest.raises(ValueError, match="claims.int8_over_fp16_typo"):
        catalog.all_rules()


_GOOD = """group = "g"
datasets = ["d"]

[[rule]]
id = "r"
statement = "s"
fact = "f"
op = ">="
threshold = 1
"""


def test_a_rules_file_applies_its_defaults(tmp_path):
    second = _GOOD.split("\n\n", 1)[1].replace('"r"', '"r2"').replace('"f"', '"f2"')
    (tmp_path / "rules.toml").write_text(_GOOD + second + 'datasets = []\nunit = "x"\n')
    one, two = load(tmp_path / "rules.toml")
    assert one == Rule("r", "s", "f", ">=", 1.0, datasets=("d",), group="g")
    assert two == Rule("r2", "s", "f2", ">=", 1.0, "x", group="g")


@pytest.mark.parametrize(
    "edit, error",
    [
        (
            ('op = ">="', 'op = ">="\nthreshhold = 2'),
            r"rule 1 \(r\): unknown keys \['threshhold'\]",
        ),
        (('group = "g"', 'grup = "g"'), r"unknown keys \['grup'\]"),
        (('fact = "f"\n', ""), r"rule 1 \(r\): missing keys \['fact'\]"),
        (("threshold = 1", 'threshold = "1"'), r"rule 1 \(r\): threshold = '1' is not a number"),
        (('datasets = ["d"]', 'datasets = ["d", 1]'), "rule 1 .*datasets = .* not a list of str"),
        (('group = "g"', "group = 3"), "group = 3 is not a string"),
        (('op = ">="', 'op = "=>"'), "op '=>' is not one of"),
        (('"s"', '"s"\n[[rule]]\nid = "r"'), "missing keys"),
        (("[[rule]]", "[[rule]"), "rules file .*rules.toml: "),
        (("threshold = 1", "threshold = 1\n" + _GOOD.split("\n\n")[1]), "rule ids used twice"),
    ],
)
def test_a_malformed_rules_file_is_one_error_naming_the_file(tmp_path, edit, error):
    path = tmp_path / "rules.toml"
    path.write_text(_GOOD.replace(*edit))
    with pytest.raises(ValueError, match=error) as e:
        load(path)
    assert f"rules file {path}" in str(e.value)


def test_statement_numbers_are_the_analysis_constants():
    from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE
    from yolo_sm.topics.batch.analyse import SATURATION
    from yolo_sm.topics.compare.analyse import AGREE_PCT
    from yolo_sm.topics.heatmaps.analyse import LOW_PCT

    rules = {
        r.id: r for t in ("batch", "compare", "launches", "your_model") for r in topic_rules(t)
    }
    shared = {  # rule id -> (the constant its statement states, is it the threshold too?)
        "batch_wide_saturates_by_b8": (100 * SATURATION, True),
        "batch_narrow_needs_more": (100 * SATURATION, True),
        "batch_memory_not_limiting": (100 * SATURATION, False),
        "compare_gpu_bound_agree": (AGREE_PCT, False),
        "compare_host_bound_gpu_work_agree": (AGREE_PCT, False),
        "hosts_eager_small_batch_host_bound": (100 * HOST_BOUND_IDLE_SHARE, False),
        "hosts_graph_keeps_gpu_busy": (100 * HOST_BOUND_IDLE_SHARE, True),
        "your_model_low_layers_dominate": (LOW_PCT, False),
    }
    for rule_id, (value, is_threshold) in shared.items():
        assert f"{value:g} %" in rules[rule_id].statement, rule_id
        assert not is_threshold or rules[rule_id].threshold == pytest.approx(value), rule_id


def test_a_count_over_no_point_reads_not_tested():
    rule = Rule(id="r", statement="every row ran", fact="rows_not_run", op="<=", threshold=0.0,
                unit="rows")  # fmt: skip
    none = facts_table([fact("rows_not_run", 0, "rows", points=0)])
    some = facts_table([fact("rows_not_run", 0, "rows", points=3)])
    assert evaluate([rule], none).verdict.item() == NOT_TESTED
    assert evaluate([rule], some).verdict.item() == HOLDS


def test_a_ratio_of_sides_at_distant_clocks_says_so_beside_its_verdict():
    rule = next(r for r in RULES if r.id == "claim_10")

    def caveat(spread):
        f = facts_table([fact(rule.fact, 1.5, "x", clock_spread_pct=spread)])
        return evaluate([rule], f).caveat.item()

    assert caveat(7.2) == "" and caveat(math.nan) == ""
    assert "12 % apart" in caveat(12.0)


def test_the_8bit_engines_clock_spread_is_recorded(h200_verdicts):
    b = _ok(_read("bench_8bit"))
    b = b[(b.backend == "cudagraph") & (b.scope == "model_only") & (b.batch == 64) & (b.width >= 1)]
    clock = (b.prov_sm_clock_start_mhz + b.prov_sm_clock_end_mhz) / 2
    c = b.assign(clock=clock).pivot_table(index="width", columns="precision", values="clock")
    spread = (100 * (c.int8 - c.fp16).abs() / c[["int8", "fp16"]].max(axis=1)).max()
    assert spread < 10  # 7.2 % at width 1.5: no caveat beside claim_10
    assert h200_verdicts.caveat["claim_10"] == ""


def test_the_memory_table_predicts_on_the_base_its_ratio_uses():
    from yolo_sm.topics.memory import analyse as memory

    life = _read("memory_lifetimes")
    t = memory.peak_table(life)
    m = life[life.level == "model"]
    measured = m.measured_peak_bytes.to_numpy() - m.resident_bytes.to_numpy()
    assert np.allclose(t.measured_activation_peak_bytes, measured)
    assert np.allclose(t.eager_activation_peak_bytes / measured, t.eager_vs_measured)


def test_precision_ratios_carry_their_clock_spread(h200_verdicts):
    p = _ok(_read("sweep_precision_core"))
    p = p[(p.backend == "cudagraph") & (p.batch == p.batch.max())]
    clock = (p.prov_sm_clock_start_mhz + p.prov_sm_clock_end_mhz) / 2
    c = p.assign(clock=clock).pivot_table(index="width", columns="precision", values="clock")
    spread = (100 * (c.tf32 - c.fp32).abs() / c[["tf32", "fp32"]].max(axis=1)).max()
    assert spread > 10  # tf32 against fp32 at the largest batch: 11 % apart
    assert f"{spread:.0f} % apart" in h200_verdicts.caveat["precision_tf32_faster_large_batch"]
    assert h200_verdicts.caveat["precision_fp16_faster_large_batch"] == ""

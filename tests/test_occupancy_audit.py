"""Audit of the headline rules of notebooks 00, 01 and 04: each fact recomputed with plain pandas
from a small copy of H200 tables (tests/fixtures/occupancy_h200) must equal the package's, and
moving the data across the rule's threshold must flip its verdict."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse.facts import value
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import theoretical_occupancy
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import rules
from yolo_sm.report.rules import topic_rules
from yolo_sm.topics import heatmaps, primer, width
from yolo_sm.topics.heatmaps import analyse as heatmaps_facts
from yolo_sm.topics.primer import analyse as primer_facts
from yolo_sm.topics.width import analyse as width_facts

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "occupancy_h200"
LIMITS = ["limit_warps", "limit_blocks", "limit_registers", "limit_shared_mem"]
TOPICS = {
    "primer": (primer.TOPIC, topic_rules("primer"), primer_facts.facts),
    "width": (width.TOPIC, topic_rules("width"), width_facts.facts),
    "heatmaps": (heatmaps.TOPIC, topic_rules("heatmaps"), heatmaps_facts.facts),
}
RULES = {r.id: (name, r) for name, (_, rs, _) in TOPICS.items() for r in rs}


def load(name):
    return pd.read_parquet(FIXTURE / f"{name}.parquet")


def tw(d, col="achieved_occupancy_pct"):
    return (d[col] * d.duration_us).sum() / d.duration_us.sum()


def width_of(config):
    return config.str.extract(r"_w([\d.]+)_")[0].astype(float)


def classed(name):
    return add_kernel_class(load(name))


_FACTS = {}


def verdict(rule_id, root):
    name, rule = RULES[rule_id]
    key = (name, str(root.path))
    f = _FACTS[key] if key in _FACTS else _FACTS.setdefault(key, TOPICS[name][2](root))
    return rules.evaluate([rule], f).verdict.iloc[0], value(f, rule.fact, rule.scope)


def root_with(tmp_path, **tables):
    """A copy of the fixture root with ``tables`` (name -> DataFrame) in place of its own."""
    out = tmp_path / "root"
    shutil.copytree(FIXTURE, out)
    mf = json.loads((out / "manifest.json").read_text())
    for name, df in tables.items():
        df.to_parquet(out / f"{name}.parquet", index=False)
        mf["datasets"][name]["rows"] = len(df)
    (out / "manifest.json").write_text(json.dumps(mf))
    return open_root(out)


@pytest.fixture(scope="module")
def root():
    return open_root(FIXTURE)


def test_every_headline_is_audited_here():
    heads = {i for t, _, _ in TOPICS.values() for ids in t.headlines.values() for i in ids}
    assert heads == set(EXPECTED)


# ---- the facts, recomputed with plain pandas -----------------------------------------------------


def _tc_below_60():
    k = classed("ncu_width_b8")
    tc = k[(k.config == "yolov8_w1_fp16_nhwc_b8") & (k.kernel_class == "tensor_core_conv")]
    return 100 * tc.duration_us[tc.achieved_occupancy_pct < 60].sum() / tc.duration_us.sum()


def _memory_minus_tc():
    k = classed("ncu_width_b8")
    k = k[k.config == "yolov8_w1_fp16_nhwc_b8"]
    mem = k[k.kernel_class.isin(["elementwise", "copy_concat", "pooling_upsample"])]
    return tw(mem) - tw(k[k.kernel_class == "tensor_core_conv"])


def _flagship_shape():
    k = classed("ncu_width_b8")
    tc = k[k.kernel_class == "tensor_core_conv"]
    shape = ["block_size", "registers_per_thread", "shared_mem_per_block_bytes"]
    return shape, tc.groupby(shape).duration_us.sum().idxmax()


def _flagship_two_limits():
    shape, top = _flagship_shape()
    k = pd.concat([load(n) for n in ("ncu_width_b8", "ncu_batch_w1", "ncu_precision_w1")])
    f = k[(k[shape] == list(top)).all(axis=1)]
    low = f[LIMITS].min(axis=1)
    return int((f.limit_registers == low).all()) + int((f.limit_shared_mem == low).all())


def _calculator_mismatch():
    k = pd.concat([load(n) for n in ("ncu_width_b8", "ncu_batch_w1", "ncu_precision_w1")])
    shape = ["block_size", "registers_per_thread", "shared_mem_per_block_bytes"]
    u = k[shape + ["theoretical_occupancy_pct"]].drop_duplicates()
    calc = [theoretical_occupancy("9.0", int(b), int(r), int(s)).occupancy_pct
            for b, r, s in u[shape].itertuples(index=False)]  # fmt: skip
    return 100 * ((u.theoretical_occupancy_pct - calc).abs() >= 0.01).mean()


def _by_width(f):
    k = load("ncu_width_b8")
    s = k.groupby(width_of(k.config)).apply(f)
    return s.sort_index()


def _wider_lower_occupancy():
    s = _by_width(tw)
    return s.iloc[-1] - s.iloc[0]


def _sm_coverage_change():
    def cov(d):
        return tw(d.assign(c=d.waves_per_sm / np.ceil(d.waves_per_sm)), "c")

    s = _by_width(cov)
    return 100 * (s.iloc[-1] - s.iloc[0])


def _graph_b8(col):
    s = load("sweep_fp16_nhwc")
    g = s[(s.status == "ok") & (s.backend == "cudagraph") & (s.batch == 8)]
    g = g.set_index("width")[col].sort_index()
    return g.iloc[-1] / g.iloc[0]


def _tc_resource_capped():
    k = classed("ncu_width_b8")
    k = k[k.kernel_class.str.startswith("tensor_core")]
    res = k[["limit_registers", "limit_shared_mem"]].min(axis=1)
    k = k.assign(c=res < k[["limit_warps", "limit_blocks"]].min(axis=1))
    share = k.groupby("config").apply(lambda g: g.duration_us[g.c].sum() / g.duration_us.sum())
    return 100 * share.min()


def _slowest_layer_widest():
    k = load("ncu_width_b8")
    k = k[k.config == "yolov8_w2_fp16_nhwc_b8"]
    layer = k.groupby("layer").duration_us.sum().idxmax()
    return tw(k[k.layer == layer])


def _small_batch_grid():
    k = load("ncu_batch_w1")
    k = k[k.config == "yolov8_w1_fp16_nhwc_b1"]
    return 100 * k.duration_us[k.waves_per_sm < 1].sum() / k.duration_us.sum()


def _fastest_not_highest():
    k = load("ncu_precision_w1")
    k = k[k.layer.notna() & (k.layer != "")]
    per = k.groupby("config").apply(lambda g: pd.Series({"t": g.duration_us.sum(), "occ": tw(g)}))
    return per.occ.max() - per.occ[per.t.idxmin()]


EXPECTED = {
    "primer_tc_conv_below_60": _tc_below_60,
    "primer_memory_kernels_high_occupancy": _memory_minus_tc,
    "primer_flagship_two_limits": _flagship_two_limits,
    "primer_calculator_matches_ncu": _calculator_mismatch,
    "width_wider_lower_occupancy": _wider_lower_occupancy,
    "width_sm_coverage_grows": _sm_coverage_change,
    "width_wider_slower_per_image": lambda: _graph_b8("img_per_s"),
    "width_wider_slower_than_flops": lambda: _graph_b8("tflops"),
    "heatmaps_resources_cap_tensor_cores": _tc_resource_capped,
    "heatmaps_slowest_layer_low": _slowest_layer_widest,
    "heatmaps_small_batch_grid_limited": _small_batch_grid,
    "heatmaps_fastest_not_highest_occupancy": _fastest_not_highest,
}


@pytest.mark.parametrize("rule_id", sorted(EXPECTED))
def test_headline_fact_equals_plain_pandas(rule_id, root):
    got, measured = verdict(rule_id, root)
    assert measured == pytest.approx(EXPECTED[rule_id](), abs=1e-9)
    assert got != rules.NOT_TESTED


# ---- moving the data across each threshold flips the verdict -------------------------------------


def _set(df, mask, **cols):
    df = df.copy()
    for c, v in cols.items():
        df.loc[mask, c] = v
    return df


def _tc(k, config=None):
    m = add_kernel_class(k).kernel_class.str.startswith("tensor_core").to_numpy()
    return m & (k.config == config).to_numpy() if config else m


def _moved(rule_id):
    """name -> table with the data moved so that ``rule_id``'s verdict changes."""
    w, b, p = load("ncu_width_b8"), load("ncu_batch_w1"), load("ncu_precision_w1")
    s = load("sweep_fp16_nhwc")
    w1, w2 = "yolov8_w1_fp16_nhwc_b8", "yolov8_w2_fp16_nhwc_b8"
    widest = (s.width == 2.0) & (s.backend == "cudagraph") & (s.batch == 8)
    narrow = s[(s.width == 0.25) & (s.backend == "cudagraph") & (s.batch == 8)].iloc[0]
    shape, top = _flagship_shape()
    return {
        "primer_tc_conv_below_60": lambda: {"ncu_width_b8": _set(
            w, _tc(w, w1), achieved_occupancy_pct=70.0)},
        "primer_memory_kernels_high_occupancy": lambda: {"ncu_width_b8": _set(
            w, (w.config == w1) & ~_tc(w), achieved_occupancy_pct=15.0)},
        "primer_flagship_two_limits": lambda: {"ncu_width_b8": _set(
            w, (w[shape] == list(top)).all(axis=1), limit_shared_mem=5)},
        "primer_calculator_matches_ncu": lambda: {"ncu_width_b8": _set(
            w, w.index[:1], theoretical_occupancy_pct=1.0)},
        "width_wider_lower_occupancy": lambda: {"ncu_width_b8": _set(
            w, w.config == w2, achieved_occupancy_pct=5.0)},
        "width_sm_coverage_grows": lambda: {"ncu_width_b8": _set(
            w, w.config == w2, waves_per_sm=0.3)},
        "width_wider_slower_per_image": lambda: {"sweep_fp16_nhwc": _set(
            s, widest, img_per_s=2 * narrow.img_per_s)},
        "width_wider_slower_than_flops": lambda: {"sweep_fp16_nhwc": _set(
            s, widest, tflops=narrow.tflops / 2)},
        "heatmaps_resources_cap_tensor_cores": lambda: {"ncu_width_b8": _set(
            w, _tc(w, w1), limit_warps=1)},
        "heatmaps_slowest_layer_low": lambda: {"ncu_width_b8": _set(
            w, w.config == w2, achieved_occupancy_pct=80.0)},
        "heatmaps_small_batch_grid_limited": lambda: {"ncu_batch_w1": _set(
            b, b.config.str.endswith("_b1"), waves_per_sm=2.0)},
        "heatmaps_fastest_not_highest_occupancy": lambda: {"ncu_precision_w1": _set(
            p, p.config == "yolov8_w1_fp16_nhwc_b8", achieved_occupancy_pct=100.0)},
    }[rule_id]()  # fmt: skip


@pytest.mark.parametrize("rule_id", sorted(EXPECTED))
def test_moving_the_data_flips_the_headline(rule_id, root, tmp_path):
    before, m0 = verdict(rule_id, root)
    after, m1 = verdict(rule_id, root_with(tmp_path, **_moved(rule_id)))
    assert before != after, (m0, m1)
    assert rules.NOT_TESTED not in (before, after)

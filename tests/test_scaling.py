"""Width and precision (notebooks 01 and 02): tables, facts and rules, on small in-memory tables
and on the shipped H200 root."""

import json
import math
import shutil

import pandas as pd
import pytest

from yolo_sm.analyse.facts import fact, facts_table, value
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.labels import with_config
from yolo_sm.report import plots, rules
from yolo_sm.report.rules import topic_rules
from yolo_sm.topics.precision import analyse as precision
from yolo_sm.topics.width import analyse as scaling
from yolo_sm.topics.width import report as scaling_plots

ALL_RULES = topic_rules("width") + topic_rules("precision")


@pytest.fixture(scope="module")
def root():
    return open_root("h200")


@pytest.fixture(scope="module")
def sweep(root):
    return root.load("sweep_fp16_nhwc")


@pytest.fixture(scope="module")
def ncu_width(root):
    return root.load("ncu_width_b8")


@pytest.fixture(scope="module")
def precision_sweep(root):
    return root.load("sweep_precision_core")


@pytest.fixture(scope="module")
def ncu_precision(root):
    return root.load("ncu_precision_w1")


@pytest.fixture(scope="module")
def wide(root):
    return scaling.wide_stack_table(root.load("ncu_wide_stack"))


@pytest.fixture(scope="module")
def width_facts(root):
    return scaling.facts(root)


@pytest.fixture(scope="module")
def precision_facts(root):
    return precision.facts(root)


# ---- rules: every rule flips across its threshold ---------------------------------------------


def _beyond(rule, x, towards_holding: bool):
    """A value just past ``x`` on the side where ``rule`` holds (or fails)."""
    step = max(abs(x) * 0.01, 1e-6)
    holds_up = rule.op in (">", ">=")
    return x + step if holds_up == towards_holding else x - step


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_each_rule_flips_across_its_threshold(rule):
    def verdict(v):
        f = facts_table([fact(rule.fact, v, rule.unit, scope=rule.scope)])
        return rules.evaluate([rule], f).verdict.iloc[0]

    assert verdict(_beyond(rule, rule.threshold, True)) == rules.HOLDS
    far = rule.partly if rule.partly is not None else rule.threshold
    assert verdict(_beyond(rule, far, False)) == rules.FAILS
    if rule.partly is not None:
        assert verdict((rule.threshold + rule.partly) / 2) == rules.PARTLY
    # a fact of another scope, or none, leaves the rule untested
    assert verdict(math.nan) == rules.NOT_TESTED


def test_rules_read_facts_that_the_facts_functions_make(width_facts, precision_facts):
    keys = set(zip(width_facts.key, width_facts.scope, strict=True)) | set(
        zip(precision_facts.key, precision_facts.scope, strict=True)
    )
    # every rule's fact exists on the shipped root, except those of datasets it lacks
    shipped = open_root("h200")
    lacking = {d for r in ALL_RULES for d in r.datasets if not shipped.has(d)}
    assert lacking <= {"int8_kernels", "sweep_precision_rest"}  # not in the shipped root yet
    for r in ALL_RULES:
        if set(r.datasets) & lacking:
            continue
        assert (r.fact, r.scope) in keys, r.id
    assert len({r.id for r in ALL_RULES}) == len(ALL_RULES)


def test_a_root_without_datasets_leaves_every_rule_untested(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"datasets": {}}))
    empty = open_root(tmp_path)
    f = pd.concat([scaling.facts(empty), precision.facts(empty)])
    assert f.empty
    v = rules.evaluate(ALL_RULES, f, empty.name)
    assert (v.verdict == rules.NOT_TESTED).all()


def _subset_root(tmp_path, names, cpu=True):
    """A root holding only ``names`` of the shipped H200 root (files copied), its provenance
    rewritten to a CPU machine when ``cpu``."""
    src = open_root("h200")
    entries = {}
    for n in names:
        e = dict(src.info(n))
        shutil.copy(src.path / e["file"], tmp_path / e["file"])
        if cpu:
            e["provenance"] = {"cpu_model": "Test CPU", "torch": "2.0"}
            e["command"] = "yolo-sm collect --plan data/plans/full.yaml --out x --only " + n
        entries[n] = e
    (tmp_path / "manifest.json").write_text(json.dumps({"datasets": entries}))
    return open_root(tmp_path)


def test_a_partial_root_decides_only_what_it_holds(tmp_path):
    part = _subset_root(tmp_path, ["sweep_fp16_nhwc"])
    f = scaling.facts(part)
    assert set(f.key) >= {"img_per_s_widest_over_narrowest"}
    assert not any(k.startswith(("wide_main", "presets", "compile")) for k in f.key)
    assert math.isnan(value(f, "best_share_of_fp16_ceiling"))  # no ceilings: no share of peak
    v = rules.evaluate(topic_rules("width"), f, part.name).set_index("id")
    assert v.loc["width_wider_slower_per_image", "verdict"] == rules.HOLDS
    assert v.loc["width_wider_lower_occupancy", "verdict"] == rules.NOT_TESTED
    assert v.loc["width_best_point_half_ceiling", "verdict"] == rules.NOT_TESTED


# ---- width: tables ---------------------------------------------------------------------------


def test_peak_is_the_roots_fp16_matmul_ceiling(root, tmp_path):
    c = root.load("ceilings")
    assert scaling.peak_tflops(root) == float(c.loc[c.ceiling == "matmul_fp16", "value"].iloc[0])
    assert math.isnan(scaling.peak_tflops(_subset_root(tmp_path, ["sweep_fp16_nhwc"])))


def test_flops_follow_width_squared(sweep):
    f = scaling.flops_by_width(sweep)
    assert len(f) == 8 and f.width.is_monotonic_increasing
    assert f.set_index("width").flops_vs_width1[1.0] == 1.0
    big = f[f.width >= 1.0]
    assert (abs(big.flops_vs_width1 / big.width_sq_vs_width1 - 1) < 0.02).all()


def test_throughput_table_and_peak_share(sweep):
    t = scaling.throughput_table(sweep, 650.0)
    assert len(t) == (sweep.status == "ok").sum()
    row = t.iloc[0]
    assert row.peak_frac == pytest.approx(row.tflops / 650.0)
    g = t[(t.backend == "cudagraph") & (t.batch == 64)].sort_values("width")
    assert g.tflops.is_monotonic_increasing and g.img_per_s.is_monotonic_decreasing
    grid = scaling.img_per_s_grid(t)
    assert grid.loc[64, ("cudagraph", 1.0)] == round(g.set_index("width").img_per_s[1.0])
    fig = scaling_plots.plot_peak_share(t)
    assert len(fig.data) == t.batch.nunique() * t.backend.nunique()
    assert "Test GPU" in scaling_plots.plot_img_per_s(t, "Test GPU").layout.title.text


def test_width_occupancy_and_classes(ncu_width):
    occ = scaling.width_occupancy(ncu_width)
    assert list(occ.width) == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    assert (occ.achieved_occupancy_tw_pct <= occ.theoretical_occupancy_tw_pct).all()
    assert occ.time_us.is_monotonic_increasing
    assert set(scaling.OCCUPANCY_COLUMNS) <= set(occ.columns)
    cls = scaling.class_occupancy(ncu_width)
    assert cls.groupby("config").time_share.sum().round(9).eq(1).all()
    assert len(scaling_plots.plot_width_occupancy(occ).data) == 4
    assert len(scaling_plots.plot_class_occupancy(cls).data) > 0


def test_speed_vs_occupancy_join(sweep, ncu_width):
    t = scaling.throughput_table(sweep, 650.0)
    sv = scaling.speed_vs_occupancy(t, scaling.width_occupancy(ncu_width), batch=8)
    assert len(sv) == 8 and sv.notna().all().all()


def test_wide_stack_limits_explain_occupancy(wide):
    assert sorted(wide.width.unique()) == [1.0, 1.25, 1.5, 1.75, 2.0]
    blocks = wide[list(scaling.LIMITS)].min(axis=1)
    expected = (blocks * wide.block_size / 32 / 64 * 100).clip(upper=100)
    assert (abs(expected - wide.theoretical_occupancy_tw_pct) < 0.01).all()
    main = scaling.dominant_kernel(wide)
    assert list(main.width) == sorted(wide.width.unique())
    assert set(scaling.WIDE_STACK_COLUMNS) <= set(wide.columns)
    assert len(scaling_plots.plot_wide_stack(wide).data) == 3 * wide.kernel_family.nunique()


def test_wide_stack_limiter_joins_ties(wide):
    lim = wide[list(scaling.LIMITS)]
    low = lim.min(axis=1)
    for (_, row), m in zip(lim.iterrows(), low, strict=True):
        names = [c.removeprefix("limit_") for c in scaling.LIMITS if row[c] == m]
        assert wide.loc[row.name, "limiter"] == " = ".join(names)


def _layers():
    rows = []
    for width, cap in ((1.25, 512), (1.25, 1024), (0.5, 512)):
        for i, (req, out) in enumerate(((80, 80), (640, 512), (19, 24))):
            rows.append(
                {
                    "family": "yolov8",
                    "width": width,
                    "max_channels": cap,
                    "layer": f"model.{i}",
                    "module_type": "Conv",
                    "stage": "backbone",
                    "requested_channels": req,
                    "out_channels": out,
                    "rounded": out > req,
                    "capped": out < req,
                    "flops": 1e6 * (i + 1),
                    "params": 10,
                }
            )
    return pd.DataFrame(rows)


def test_channel_table_selects_one_model():
    t = scaling.channel_table(_layers(), family="yolov8", width=1.25, max_channels=512)
    assert len(t) == 3 and list(t.columns) == list(scaling.CHANNEL_COLUMNS)
    assert t.capped.tolist() == [False, True, False] and t.rounded.tolist() == [False, False, True]
    assert len(scaling.channel_table(_layers(), family="yolov8", width=1.25)) == 6
    assert scaling.channel_table(_layers(), family="yolo11", width=1.25).empty


def _preset(scale, gflops, img_per_s, backend="eager", batch=8, status="ok", when=None):
    return {
        "family": "yolov8",
        "scale": scale,
        "width": 1.0,
        "depth": 0.33,
        "precision": "fp16",
        "backend": backend,
        "batch": batch,
        "status": status,
        "message": "",
        "gflops_per_img": gflops,
        "img_per_s": img_per_s,
        "median_ms": 1.0,
        "tflops": gflops * img_per_s / 1e3,
        "peak_frac": 0.1,
        "prov_date_utc": when or "2026-11-30T10:00:00",
    }


def test_presets_table_of_the_shipped_presets(root):
    raw = root.load("sweep_presets")
    t = scaling.presets_table(raw, 650.0)
    assert len(t) == len(raw) and set(t.scale) <= set("nsmlx")
    for _, g in t.groupby(["family", "precision", "backend", "batch"]):
        assert g.gflops_per_img.is_monotonic_increasing
    grid = scaling.presets_grid(t)
    assert grid.index.names == ["family", "scale"]
    assert len(scaling_plots.plot_presets(t, batch=64).data) >= 1


def test_presets_facts_count_inversions():
    t = pd.DataFrame(
        [
            _preset("n", 8, 1300),
            _preset("s", 28, 1500),  # costlier, faster: launch-bound (eager, batch 8)
            _preset("m", 79, 900),
            _preset("n", 8, 9000, "cudagraph", 64),
            _preset("s", 28, 9500, "cudagraph", 64, when="2026-11-30T11:00:00"),
            _preset("x", 250, 1000, "cudagraph", 64, status="error"),
        ]
    )
    inv = scaling.preset_inversions(t)
    assert inv[["scale", "cheaper_scale"]].values.tolist() == [["s", "n"], ["s", "n"]]
    f = facts_table(scaling.presets_facts(t))
    assert value(f, "presets_inversions_not_host_bound") == 1  # the CUDA graph one
    # rows in (backend, batch) order: the CUDA graph's, then eager's; without host columns eager
    # at batch 8 is the host's, and a measured verdict decides where the table has one
    assert inv.backend.tolist() == ["cudagraph", "eager"]
    assert inv.host_bound.tolist() == [False, True]
    t["host_bound"] = [False, False, False, False, True, False]
    inv = scaling.preset_inversions(t)
    assert inv.host_bound.tolist() == [True, False]
    measured = facts_table(scaling.presets_facts(t))
    assert value(measured, "presets_inversions_not_host_bound") == 1  # now the eager one
    s_over_n = (28 * 9500) / (8 * 9000)
    assert value(f, "presets_tflops_costliest_over_cheapest", "family=yolov8") == pytest.approx(
        s_over_n
    )
    monotone = facts_table(scaling.presets_facts(t[t.scale != "s"]))
    assert value(monotone, "presets_inversions_not_host_bound") == 0


def _bench_unit(width, batch, ratios):
    """A synthetic bench unit: eager at 100 img/s, each variant at 100 x its ratio (None: a
    failed row)."""
    rows = [
        {
            "width": width,
            "batch": batch,
            "variant": "eager/fp16/nhwc",
            "backend": "eager",
            "scope": "model_only",
            "status": "ok",
            "img_per_s": 100.0,
            "vs_baseline": 1.0,
        }
    ]
    for v, r in ratios.items():
        rows.append(
            {
                "width": width,
                "batch": batch,
                "variant": v,
                "backend": v.split("/")[0].split(":")[0],
                "scope": "model_only",
                "status": "ok" if r is not None else "error",
                "img_per_s": 100.0 * r if r is not None else float("nan"),
                "vs_baseline": r if r is not None else float("nan"),
            }
        )
    return rows


G, C, RO = "cudagraph/fp16/nhwc", "compile/fp16/nhwc", "compile:reduce-overhead/fp16/nhwc"


def test_compile_by_width_pairs_each_unit():
    bench = pd.DataFrame(
        _bench_unit(0.5, 1, {G: 4.0, C: 1.5, RO: 6.0})
        + _bench_unit(2.0, 1, {G: 2.0, C: 1.6, RO: 3.0})
        + _bench_unit(0.5, 64, {G: 1.02, C: 1.9, RO: None})
        + _bench_unit(2.0, 64, {G: 1.01, C: 1.4, RO: 1.4})
    )
    t = scaling.compile_by_width(bench)
    assert list(t.columns) == [
        "width",
        "batch",
        "eager_img_per_s",
        "eager_host_bound",
        "CUDA graph",
        "compile",
        "compile reduce-overhead",
    ]
    row = t.set_index(["width", "batch"]).loc[(0.5, 64)]
    assert row["compile"] == 1.9 and pd.isna(row["compile reduce-overhead"])
    f = facts_table(scaling.compile_facts(t))
    assert value(f, "compile_gain_widest_over_narrowest") == pytest.approx(1.4 / 1.9)
    assert value(f, "graph_over_compile_max_large_batch") == pytest.approx(1.01 / 1.4)  # w2
    assert value(f, "graph_over_compile_small_batch") == pytest.approx(3.0 / 1.55)
    # batch 1 eager is host-bound (no host columns: the heuristic), so is a point whose sweep
    # measured it so: neither is compared across runs
    assert t.set_index(["width", "batch"]).eager_host_bound.to_dict() == {
        (0.5, 1): True, (2.0, 1): True, (0.5, 64): False, (2.0, 64): False
    }  # fmt: skip
    sweep = pd.DataFrame(
        [
            {
                "width": w,
                "batch": b,
                "backend": "eager",
                "precision": "fp16",
                "layout": "nhwc",
                "status": "ok",
                "img_per_s": ips,
                "host_bound": bound,
            }
            for w, b, ips, bound in (
                (0.5, 1, 200.0, True),
                (2.0, 1, 90.0, True),
                (0.5, 64, 80.0, False),
                (2.0, 64, 300.0, True),
            )
        ]
    )
    d = scaling.eager_drift(t, sweep).set_index(["width", "batch"]).ratio
    assert d.to_dict() == {(0.5, 64): pytest.approx(100 / 80)}
    f = facts_table(scaling.compile_facts(t, sweep))
    assert value(f, "bench_vs_sweep_eager_max_dev") == pytest.approx(25.0)
    # the sweep's host-bound point counts again once its verdict says the GPU set its pace
    sweep.loc[3, "host_bound"] = False
    d = scaling.eager_drift(t, sweep).set_index(["width", "batch"]).ratio
    assert d[(2.0, 64)] == pytest.approx(100 / 300)
    assert scaling.compile_facts(t.iloc[:0]) == []
    assert scaling_plots.plot_compile_by_width(bench).data


def test_compile_by_width_of_the_shipped_bench(root):
    t = scaling.compile_by_width(root.load("bench_fast_engines"))
    assert {1, 16, 64} <= set(t.batch) and t["compile"].notna().sum() >= 3


# ---- width: facts --------------------------------------------------------------------------------


def _table(rows):
    return pd.DataFrame(rows, columns=["width", "batch", "backend", "img_per_s", "tflops"])


def test_throughput_facts_on_a_small_table():
    t = _table(
        [
            (0.5, 8, "cudagraph", 4000.0, 100.0),
            (2.0, 8, "cudagraph", 1000.0, 300.0),
            (0.5, 1, "eager", 500.0, 5.0),
            (2.0, 1, "eager", 400.0, 30.0),
            (0.5, 1, "cudagraph", 1500.0, 15.0),
            (2.0, 1, "cudagraph", 600.0, 45.0),
        ]
    )
    f = facts_table(scaling.throughput_facts(t, batch=8, peak=600.0))
    assert value(f, "img_per_s_widest_over_narrowest") == 0.25
    assert value(f, "tflops_widest_over_narrowest") == 3.0
    assert value(f, "best_share_of_fp16_ceiling") == 50.0
    assert value(f, "batch1_eager_spread") == 1.25


def test_occupancy_and_wide_stack_facts_on_the_shipped_root(width_facts, ncu_width, wide):
    occ = scaling.width_occupancy(ncu_width).set_index("width")
    ac = occ.achieved_occupancy_tw_pct
    assert value(width_facts, "width_achieved_occupancy_change") == pytest.approx(
        ac[2.0] - ac[0.25]
    )
    cov = occ.sm_coverage_tw
    assert value(width_facts, "width_sm_coverage_change") == pytest.approx(
        100 * (cov[2.0] - cov[0.25])
    )
    main = scaling.dominant_kernel(wide).set_index("width")
    assert value(width_facts, "wide_main_tensor_pipe_change") == pytest.approx(
        main.tensor_pipe_tw_pct[2.0] - main.tensor_pipe_tw_pct[1.0]
    )
    assert value(width_facts, "wide_main_block_sizes") == 1


def test_width_verdicts_on_the_shipped_root(root, width_facts):
    v = rules.evaluate(topic_rules("width"), width_facts, root.name).set_index("id")
    # the story "wider -> lower occupancy -> slower than its FLOPs" is decided by the data
    assert v.loc["width_wider_slower_per_image", "verdict"] == rules.HOLDS
    assert v.loc["width_wider_slower_than_flops", "verdict"] == rules.FAILS
    assert v.loc["width_wider_lower_occupancy", "verdict"] == rules.FAILS
    assert v.loc["width_block_does_not_widen", "verdict"] == rules.HOLDS
    assert v.loc["width_wider_lower_occupancy", "datasets"] == "h200/ncu_width_b8"


# ---- precision: tables ---------------------------------------------------------------------------


def test_precision_speedup_same_run(precision_sweep):
    sp = precision.precision_speedup(precision_sweep)
    assert set(sp.precision) <= {"tf32", "fp16", "bf16"} and sp.ratio.notna().all()
    ok = precision_sweep.set_index(["width", "layout", "batch", "backend", "precision"]).median_ms
    r = sp.iloc[0]
    key = (r.width, r.layout, r.batch, r.backend)
    assert r.ratio == pytest.approx(ok[(*key, "fp32")] / ok[(*key, r.precision)])
    assert "clock_spread_pct" in sp
    grid = precision.speedup_grid(sp)
    assert grid.index.names == ["backend", "batch"]
    assert len(scaling_plots.plot_precision_speedup(sp).data) > 0


def test_ratio_by_width_takes_the_median_from_a_batch_up():
    r = pd.DataFrame(
        {
            "precision": "bf16",
            "backend": "cudagraph",
            "width": [0.25, 0.25, 2.0, 2.0],
            "batch": [16, 64, 16, 8],
            "ratio": [0.9, 0.94, 1.02, 5.0],
        }
    )
    t = precision.ratio_by_width(r, precision="bf16").set_index("width")
    assert t.ratio[0.25] == pytest.approx(0.92) and t.ratio[2.0] == 1.02  # batch 8 left out


def test_precision_forward_kernel_mix(ncu_precision):
    fwd = precision.precision_forward(ncu_precision).set_index(["precision", "layout"])
    assert len(fwd) == 8
    assert fwd.loc[("fp32", "nchw"), "tensor_core_share"] == 0
    assert fwd.loc[("fp16", "nhwc"), "layout_transform_share"] == 0
    assert fwd.loc[("fp16", "nchw"), "layout_transform_kernels"] > 0
    shares = precision.precision_class_shares(ncu_precision)
    assert shares.groupby("config").time_share.sum().round(9).eq(1).all()
    mm = precision.precision_matmul(ncu_precision)
    assert mm.registers_per_thread_tw.between(1, 255).all()
    assert set(precision.MATMUL_COLUMNS) <= set(mm.columns)
    fig = scaling_plots.plot_precision_forward(precision.precision_forward(ncu_precision))
    assert len(fig.data) == 3 and "width 1 batch 8" in fig.layout.title.text
    assert scaling_plots.plot_precision_class_shares(ncu_precision).data


def test_error_table_against_tolerance(precision_sweep, sweep):
    e = precision.error_table(precision_sweep, sweep).set_index(["precision", "layout"])
    assert e.loc[("fp32", "nchw"), "max"] == 0
    assert (e["max"] <= e.tolerance).all()
    assert e.loc[("fp16", "nhwc"), "points"] == (sweep.status == "ok").sum()
    assert len(scaling_plots.plot_rel_err(precision_sweep, sweep).data) > 0


def test_precision_layer_delta(ncu_precision):
    d = precision.precision_layer_delta(ncu_precision, "bf16", "fp16", layout="nhwc")
    k = with_config(ncu_precision)
    for prec in ("bf16", "fp16"):
        one = k[(k.precision == prec) & (k.layout == "nhwc")]
        assert d[f"{prec}_us"].sum() == pytest.approx(one.duration_us.sum())
    assert (d.delta_us == d.bf16_us.fillna(0) - d.fp16_us.fillna(0)).all()
    assert d.delta_us.abs().is_monotonic_decreasing
    assert precision.precision_layer_delta(k[k.precision != "bf16"]).empty


def _fp8_bench():
    rows = []
    for w, errs in {0.5: (0.2, 0.15, 0.148), 1.0: (0.09, 0.085, 0.084)}.items():
        for b, e in zip((1, 16, 64), errs, strict=True):
            ok = e <= 0.1
            rows.append(
                {
                    "width": w,
                    "batch": b,
                    "variant": "cudagraph/fp8/nhwc",
                    "status": "ok" if ok else "error",
                    "rel_err": e if ok else float("nan"),
                    "message": ""
                    if ok
                    else "NumericalMismatch: cudagraph fp8 nhwc: relative L2 "
                    f"error {e} vs eager fp32 exceeds the fp8 tolerance 0.1",
                }
            )
    rows.append(
        {
            "width": 1.0,
            "batch": 16,
            "variant": "eager/fp16/nhwc",
            "status": "ok",
            "rel_err": 0.001,
            "message": "",
        }
    )
    return pd.DataFrame(rows)


def _numerics(prior_w05=0.32):
    rows = [
        {"width": w, "precision": p, "input": "random", "class_prior": False, "rel_err": e}
        for w in (0.5, 1.0)
        for p, e in (("fp32", 0.0), ("fp16", 0.001), ("bf16", 0.05))
    ]
    for w, scale in ((0.5, 4.0), (1.0, 1.0)):
        for prior, fp8 in ((False, 0.01), (True, 0.08)):
            for p, e in (("fp16", 0.0003 * scale), ("bf16", 0.003 * scale), ("fp8", fp8 * scale)):
                if prior and p == "fp8" and w == 0.5:
                    e = prior_w05
                rows.append(
                    {
                        "width": w,
                        "precision": p,
                        "input": "photo",
                        "class_prior": prior,
                        "rel_err": e,
                    }
                )
    return pd.DataFrame(rows).assign(tolerance=lambda d: d.precision.map(precision.tolerance))


def test_bench_check_errors_reads_failed_checks_from_their_message():
    g = precision.bench_check_errors(_fp8_bench()).set_index("width")
    assert g.loc[0.5, "gpu_err_min"] == 0.148 and g.loc[0.5, "gpu_err_max"] == 0.15
    assert g.loc[0.5, "failed"] == 2 and g.loc[1.0, "failed"] == 0
    allb = precision.bench_check_errors(_fp8_bench(), min_batch=1).set_index("width")
    assert allb.loc[0.5, "gpu_err_max"] == 0.2
    assert precision.bench_check_errors(_fp8_bench(), variant="nope").empty
    f = facts_table(precision.fp8_bench_facts(_fp8_bench()))
    assert value(f, "fp8_engine_batches_over_tolerance") == 2


def test_numerics_tables_and_facts():
    n = _numerics()
    s = precision.numerics_summary(n).set_index("precision")
    assert s.loc["bf16", "max"] == 0.05 and s.loc["bf16", "points"] == 2
    t = precision.fp8_error_table(n, _fp8_bench())
    assert list(t.columns[:4]) == ["width", "fp16", "bf16", "fp8"]
    assert "fp8, class prior" in t and "fp8 engine, max" in t
    assert not any("H200" in c for c in t.columns)
    f = facts_table(precision.numerics_facts(n, _fp8_bench()))
    assert value(f, "numerics_error_over_tolerance_max") == pytest.approx(0.05 / 0.1)
    assert value(f, "fp8_error_over_tolerance_max") == pytest.approx(0.04 / 0.1)
    assert value(f, "fp8_prior_error_over_tolerance_max") == pytest.approx(0.32 / 0.1)
    # engine 0.148-0.15 against emulated 0.32 at width 0.5; 0.084-0.085 against 0.08 at 1.0
    assert value(f, "fp8_engine_vs_emulation_max_dev") == pytest.approx(100 * (1 - 0.148 / 0.32))
    assert value(f, "narrowest_error_amplification_min") == pytest.approx(4.0)
    close = facts_table(precision.numerics_facts(_numerics(prior_w05=0.149), _fp8_bench()))
    assert value(close, "fp8_engine_vs_emulation_max_dev") < 20
    flat = n.assign(rel_err=0.01)
    amp = value(facts_table(precision.numerics_facts(flat)), "narrowest_error_amplification_min")
    assert amp == 1.0


# ---- precision: facts ----------------------------------------------------------------------------


def test_speedup_facts_read_exactly_the_batches_their_rules_name():
    r = pd.DataFrame(
        {
            "precision": "fp16",
            "backend": ["cudagraph", "cudagraph", "cudagraph", "eager", "eager", "eager"],
            "width": [0.5, 2.0, 0.5, 0.5, 2.0, 0.5],
            "layout": "nchw",
            "batch": [64, 64, 128, 1, 1, 8],
            "ratio": [2.0, 3.0, 1.5, 1.1, 1.3, 0.2],
            "clock_spread_pct": [1.0, 12.0, 30.0, 0.0, 0.5, 40.0],
        }
    )
    f = facts_table(precision.speedup_facts(r)).set_index(["key", "scope"])
    # batch 128 and batch 8 rows are not what the statements name: left out
    assert f.value["speedup_b64_min", "precision=fp16"] == 2.0
    assert f.clock_spread_pct["speedup_b64_min", "precision=fp16"] == 12.0
    assert f.value["speedup_eager_b1", "precision=fp16"] == pytest.approx(1.2)
    assert ("speedup_b64_min", "precision=bf16") not in f.index


def test_kernel_pair_and_error_facts_on_the_shipped_root(root, precision_facts, ncu_precision):
    fwd = precision.precision_forward(ncu_precision).set_index(["precision", "layout"])
    a, b = fwd.loc[("fp32", "nchw")], fwd.loc[("fp16", "nhwc")]
    assert value(precision_facts, "simt_share_fp32_nchw") == pytest.approx(100 * a.simt_share)
    assert value(precision_facts, "kernel_time_fp32_nchw_over_fp16_nhwc") == pytest.approx(
        a.time_us / b.time_us
    )
    d = precision.precision_layer_delta(ncu_precision)
    diff = d.bf16_us.sum() - d.fp16_us.sum()
    assert value(precision_facts, "bf16_vs_fp16_top_layer_share_of_diff") == pytest.approx(
        100 * d.delta_us.iloc[0] / diff
    )
    assert value(precision_facts, "fp8_engine_batches_over_tolerance") >= 0


def test_precision_verdicts_on_the_shipped_root(root, precision_facts):
    v = rules.evaluate(topic_rules("precision"), precision_facts, root.name).set_index("id")
    assert v.loc["precision_fp16_faster_large_batch", "verdict"] == rules.HOLDS
    # the shipped numerics (random inputs, as built): the worst error over its tolerance
    summary = precision.numerics_summary(root.load("numerics"))
    worst = (summary["max"] / summary.tolerance).max()
    expected = rules.HOLDS if worst <= 1.0 else rules.FAILS
    assert v.loc["precision_numerics_within_tolerance", "verdict"] == expected


# ---- notebook helpers ---------------------------------------------------------------------------


def test_lines_about_a_root(root, tmp_path):
    ncu, other = plots.lacks(root, "ncu_nope"), plots.lacks(root, "nope")
    assert "ncu_nope" in ncu and root.name in ncu and ncu != other.replace("nope", "ncu_nope")
    both = plots.lacks(root, ["sweep_a", "sweep_b"])
    assert "sweep_a" in both and "sweep_b" in both
    assert root.device_name() in plots.about(root)
    cpu = _subset_root(tmp_path, ["sweep_fp16_nhwc"])
    assert "Test CPU" in plots.about(cpu) and "H200" not in plots.about(cpu)
    assert "662" in scaling_plots.peak_sentence(662.1)
    assert "nan" not in scaling_plots.peak_sentence(float("nan")).lower()


@pytest.mark.parametrize("names", [["sweep_fp16_nhwc", "sweep_presets"], []], ids=["some", "none"])
@pytest.mark.parametrize("nb", ["01_width_scaling.ipynb", "02_precision.ipynb"])
def test_notebook_renders_from_a_partial_cpu_root(nb, names, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    from pathlib import Path

    from tests.notebook_cache import CELL_S, NOTEBOOK_S
    from yolo_sm.report.render import run

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))  # this checkout
    part = _subset_root(tmp_path, names)
    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    book = nbformat.read(notebooks / nb, 4)
    params = next(c for c in book.cells if "parameters" in c.metadata.get("tags", []))
    params.source += f"\nDATA = {str(part.path)!r}"
    book = run(book, notebooks, timeout=CELL_S, limit=NOTEBOOK_S)  # bounded like every execution
    text = json.dumps([c.get("outputs", []) for c in book.cells])
    assert "H200" not in text
    for name in ("ncu_width_b8", "ncu_precision_w1", "bench_fast_engines"):  # sections it lacks
        if name in book.cells[1].source:
            assert json.dumps(plots.lacks(part, name))[1:-1] in text

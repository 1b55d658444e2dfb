"""Layer heatmaps (notebook 04) from the shipped H200 Nsight Compute and profile tables: the
tables, the figures and the facts the rules and the width claim read."""

import numpy as np
import pandas as pd
import pytest

from yolo_sm.analyse.facts import value
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.contract import datasets
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import colors, rules
from yolo_sm.report.rules import topic_rules
from yolo_sm.topics.heatmaps import analyse as heatmaps
from yolo_sm.topics.heatmaps import report as heatmaps_plots


@pytest.fixture(scope="module")
def width_kernels():
    return datasets.load("h200/ncu_width_b8")


@pytest.fixture(scope="module")
def widths(width_kernels):
    return heatmaps.layer_table(width_kernels)


def test_parse_config_and_natural_layer_order():
    c = heatmaps.parse_config("yolov8_w1.5_fp16_nhwc_b8")
    assert c == {
        "family": "yolov8",
        "width": 1.5,
        "precision": "fp16",
        "layout": "nhwc",
        "batch": 8,
    }
    assert heatmaps.parse_config("yolov8_w2_bf16_nchw_b64")["width"] == 2.0
    with pytest.raises(ValueError):
        heatmaps.parse_config("resnet101_b8")
    assert heatmaps.layer_order(["model.10", "model.2", "model.0", "model.22"]) == [
        "model.0",
        "model.2",
        "model.10",
        "model.22",
    ]
    assert (
        sorted(["yolov8_w0.5_fp16_nhwc_b8", "yolov8_w0.25_fp16_nhwc_b8"], key=heatmaps.config_key)[
            0
        ]
        == "yolov8_w0.25_fp16_nhwc_b8"
    )


def test_short_kernel_name():
    n = "void at::<unnamed>::CatArrayBatchedCopy<at::<unnamed>::OpaqueType<2>, 3>(T1 *, int)"
    assert heatmaps.short_kernel_name(n) == "at::CatArrayBatchedCopy"
    long = heatmaps.short_kernel_name("x" * 200, max_len=40)
    assert len(long) == 40 and long.endswith("...")


def test_limiter_is_grid_under_one_wave_else_smallest_block_limit():
    df = pd.DataFrame(
        {
            "limit_warps": [16, 5, 16, 16],
            "limit_blocks": [32, 32, 32, 32],
            "limit_registers": [21, 1, 16, 21],
            "limit_shared_mem": [32, 2, 32, 3],
            "waves_per_sm": [6.0, 1.0, 2.0, 0.5],
        }
    )
    out = heatmaps.add_limiter(df)
    # tie warps == registers (16) goes to warps: the hardware cap is named first
    assert out.block_limiter.tolist() == ["warps", "registers", "warps", "shared_mem"]
    assert out.limiter.tolist() == ["warps", "registers", "warps", "grid"]


def test_layer_table_covers_every_width_and_layer(widths, width_kernels):
    assert sorted(widths.width.unique()) == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    assert widths.groupby("width").layer.nunique().eq(23).all()
    # model order, not string order: model.10 comes after model.9
    order = widths[widths.width == 1.0].sort_values("layer_idx").layer.tolist()
    assert order[:3] == ["model.0", "model.1", "model.2"] and order[-1] == "model.22"
    # time shares sum to 1 within each config; kernel time is conserved
    assert np.allclose(widths.groupby("config").time_share.sum(), 1.0)
    assert widths.time_us.sum() == pytest.approx(width_kernels.duration_us.sum())
    assert widths.kernels.sum() == len(width_kernels)
    for col in ("achieved_occupancy_tw_pct", "theoretical_occupancy_tw_pct"):
        assert widths[col].between(0, 100).all()
    # achieved never exceeds theoretical by more than measurement noise, per layer
    assert (widths.achieved_occupancy_tw_pct <= widths.theoretical_occupancy_tw_pct + 1).all()
    assert set(widths.main_limiter) <= set(heatmaps.LIMITERS)
    assert widths.main_limiter_share.between(0, 1).all()


def test_limiter_shares_sum_to_one(width_kernels):
    s = heatmaps.limiter_shares(width_kernels)
    cols = [c for c in heatmaps.LIMITERS if c in s]
    assert np.allclose(s[cols].sum(axis=1), 1.0)
    assert s.width.is_monotonic_increasing and len(s) == 8


def test_config_summary_matches_the_layer_rows(widths):
    s = heatmaps.config_summary(widths, by="width", threshold=50)
    assert len(s) == 8 and (s.layers == 23).all()
    w1 = widths[widths.width == 1.0]
    row = s.set_index("width").loc[1.0]
    assert row.layers_below_50 == (w1.achieved_occupancy_tw_pct < 50).sum()
    expect = (w1.achieved_occupancy_tw_pct * w1.time_us).sum() / w1.time_us.sum()
    assert row.achieved_occupancy_tw_pct == pytest.approx(expect)
    # wider models do more work: the forward's kernel time grows with width
    assert s.forward_kernel_ms.is_monotonic_increasing


def test_kernels_of_one_cell(width_kernels, widths):
    cfg = "yolov8_w2_fp16_nhwc_b8"
    layer = heatmaps.slowest_layer(widths, cfg)
    k = heatmaps.kernels_of(width_kernels, cfg, layer)
    assert list(k.columns) == list(heatmaps.KERNEL_COLUMNS)
    cell = widths[(widths.config == cfg) & (widths.layer == layer)].iloc[0]
    assert len(k) == cell.kernels
    assert k.duration_us.sum() == pytest.approx(cell.time_us)
    assert k.kernel_id.is_monotonic_increasing
    assert k.kernel.str.len().max() <= 80
    with pytest.raises(ValueError):
        heatmaps.kernels_of(width_kernels, cfg, "model.99")
    fig = heatmaps_plots.plot_kernels(k)
    assert sum(len(t.x) for t in fig.data if t.type == "bar") == len(k)


def test_heatmaps_put_layers_in_model_order(widths):
    fig = heatmaps_plots.plot_layer_heatmap(
        widths, ("achieved_occupancy_tw_pct", "theoretical_occupancy_tw_pct"), x="width"
    )
    assert len(fig.data) == 2
    hm = fig.data[0]
    assert list(hm.y[:3]) == ["model.0 Conv", "model.1 Conv", "model.2 C2f"]
    assert list(hm.x) == ["w0.25", "w0.5", "w0.75", "w1", "w1.25", "w1.5", "w1.75", "w2"]
    z = np.asarray(hm.z, dtype=float)
    assert z.shape == (23, 8) and not np.isnan(z).any()
    lim = heatmaps_plots.plot_limiter_heatmap(widths, x="width").data[0]
    assert np.asarray(lim.z).shape == (23, 8)
    assert all(str(t).split()[0] in heatmaps.LIMITERS for t in np.ravel(lim.text))


def test_precision_variants_in_precision_order():
    p = heatmaps.layer_table(datasets.load("h200/ncu_precision_w1"))
    fig = heatmaps_plots.plot_layer_heatmap(p, "achieved_occupancy_tw_pct", x="variant")
    xs = list(fig.data[0].x)
    assert xs[:2] == ["fp32 nchw", "fp32 nhwc"] and len(xs) == 8
    s = heatmaps.config_summary(p, by="variant").set_index("variant")
    # IEEE fp32 runs SIMT convolutions at far lower occupancy than fp16 on the tensor cores
    assert (
        s.loc["fp32 nhwc", "achieved_occupancy_tw_pct"]
        < s.loc["fp16 nhwc"].achieved_occupancy_tw_pct
    )


def test_estimate_vs_measured():
    est = heatmaps.estimate_vs_measured(datasets.load("h200/profile_layers"))
    assert set(est.width) == {0.5, 1.5}
    assert np.allclose(est.groupby("config").time_share.sum(), 1.0)
    assert np.allclose(
        est.est_minus_achieved, est.est_occupancy_tw_pct - est.ncu_achieved_occupancy_tw_pct
    )
    fig = heatmaps_plots.plot_estimate_vs_measured(est)
    assert sum(len(t.x) for t in fig.data) == len(est)
    out = heatmaps.kineto_outliers(est)
    assert (out.est_minus_achieved.abs() > heatmaps.KINETO_TOLERANCE).all()
    assert len(out) == (est.est_minus_achieved.abs() > heatmaps.KINETO_TOLERANCE).sum()


@pytest.fixture(scope="module")
def facts():
    return heatmaps.facts(open_root("h200"))


def test_per_width_facts_are_the_summary(facts, widths):
    s = heatmaps.config_summary(widths, by="width").set_index("width")
    for w, row in s.iterrows():
        sc = f"width={w:g}"
        assert value(facts, "achieved_occupancy_tw_pct", sc) == pytest.approx(
            row.achieved_occupancy_tw_pct
        )
    # what no rule reads is not computed
    assert not facts.key.isin(["layers_below_50_share", "forward_kernel_ms"]).any()


def test_width_claim_facts(facts, widths):
    s = heatmaps.config_summary(widths, by="width").set_index("width")
    per = s.achieved_occupancy_tw_pct
    low = 100 * s.layers_below_50 / s.layers
    assert value(facts, "achieved_occupancy_tw_pct_min", "width<=1.25") == pytest.approx(
        per[per.index <= 1.25].min()
    )
    assert value(facts, "achieved_occupancy_tw_pct_distance_from_60", "width=1.5") == (
        pytest.approx(abs(per[1.5] - 60))
    )
    assert value(facts, "layers_below_50_share_min", "width>1.7") == pytest.approx(
        low[low.index > 1.7].min()
    )


def test_limiter_facts_are_the_limiter_shares(facts):
    s = heatmaps.limiter_shares(datasets.load("h200/ncu_batch_w1")).set_index("batch")
    assert value(facts, "grid_limited_time_share_smallest_batch") == pytest.approx(
        100 * s.loc[1, "grid"]
    )
    # tensor-core time whose register or shared-memory limit is below both slot limits,
    # whatever the grid (plain pandas)
    k = add_kernel_class(datasets.load("h200/ncu_width_b8"))
    k = k[k.kernel_class.str.startswith("tensor_core")]
    res = k[["limit_registers", "limit_shared_mem"]].min(axis=1)
    k = k.assign(res=res < k[["limit_warps", "limit_blocks"]].min(axis=1))
    share = k.groupby("config").apply(
        lambda g: 100 * g.duration_us[g.res].sum() / g.duration_us.sum()
    )
    assert value(facts, "tc_resource_capped_time_share_min_over_widths") == pytest.approx(
        share.min()
    )


def test_precision_and_kineto_facts(facts):
    p = heatmaps.config_summary(
        heatmaps.layer_table(datasets.load("h200/ncu_precision_w1")), by="variant"
    ).set_index("variant")
    best = p.achieved_occupancy_tw_pct.max()
    fastest = p.loc[p.forward_kernel_ms.idxmin(), "achieved_occupancy_tw_pct"]
    assert value(facts, "fastest_variant_occupancy_below_highest_pct_points") == pytest.approx(
        best - fastest
    )
    est = heatmaps.estimate_vs_measured(datasets.load("h200/profile_layers"))
    within = (est.est_minus_achieved.abs() <= 10).mean()
    assert value(facts, "kineto_layers_within_10_share") == pytest.approx(100 * within)


def test_every_rule_reads_a_fact_the_h200_root_has(facts):
    keys = set(zip(facts.key, facts.scope, strict=True))
    for r in topic_rules("heatmaps"):
        assert (r.fact, r.scope) in keys, r.id
    v = rules.evaluate(topic_rules("heatmaps"), facts, "h200").set_index("id").verdict
    assert v["heatmaps_small_batch_grid_limited"] == rules.HOLDS


def test_an_empty_root_has_no_facts(tmp_path):
    (tmp_path / "manifest.json").write_text('{"datasets": {}}')
    f = heatmaps.facts(open_root(tmp_path))
    assert f.empty
    v = rules.evaluate(topic_rules("heatmaps"), f)
    assert (v.verdict == rules.NOT_TESTED).all()


def test_occupancy_heatmaps_use_the_neutral_scale_and_shared_colours(widths):
    fig = heatmaps_plots.plot_layer_heatmap(widths, "achieved_occupancy_tw_pct")
    scale = [c for _, c in fig.layout.coloraxis.colorscale]
    from plotly.colors import get_colorscale

    assert scale == [c for _, c in get_colorscale(colors.OCCUPANCY_SCALE)]
    lim = heatmaps_plots.plot_limiter_heatmap(widths).data[0]
    present = list(lim.colorbar.ticktext)
    used = {c for _, c in lim.colorscale}
    assert used == {colors.COLORS[p] for p in present}
    bars = heatmaps_plots.plot_limiter_shares(
        heatmaps.limiter_shares(datasets.load("h200/ncu_width_b8"))
    )
    assert all(t.marker.color == colors.COLORS[t.name] for t in bars.data)


def test_layout_transform_facts(facts):
    from yolo_sm.analyse.kernels import add_kernel_class

    k = add_kernel_class(datasets.load("h200/ncu_precision_w1"))
    per = {}
    for cfg, g in k.groupby("config"):
        c = heatmaps.parse_config(cfg)
        lt = g[g.kernel_class == "layout_transform"].duration_us.sum()
        per[f"{c['precision']} {c['layout']}"] = 100 * lt / g.duration_us.sum()
    # decided once, in 07 (roofline_nchw_transforms): 04 computes no layout-transform fact
    assert per["fp16 nchw"] > per["fp16 nhwc"]
    assert not facts.key.str.startswith("layout_transform").any()

"""yolo-sm profile's per-layer join, on the shipped H200 data (same configs in Kineto and ncu)."""

import json

import pandas as pd
import pytest

from yolo_sm.analyse import gpm
from yolo_sm.contract import datasets
from yolo_sm.core.profiling import suite

CONFIGS = ["yolov8_w0.5_fp16_nhwc_b8", "yolov8_w1.5_fp16_nhwc_b8"]


@pytest.fixture(scope="module")
def tables():
    k = datasets.load("h200/trace_width_b8")
    n = datasets.load("h200/ncu_width_b8")
    g = datasets.load("h200/gpm_width_b16")
    return k[k.config.isin(CONFIGS)], n[n.config.isin(CONFIGS)], g


@pytest.fixture(scope="module")
def layers(tables):
    return suite.join_layers(*tables)


def test_every_kernel_of_the_h200_forwards_has_a_layer(tables):
    k, n, _ = tables
    u = suite.unattributed(k, n)
    assert u["kineto"] == 0 and u["ncu"] == 0
    assert u["kineto_total"] > 2 * 400 and u["ncu_total"] > 400


def test_join_has_one_row_per_layer_and_both_profilers(layers):
    assert set(layers.config) == set(CONFIGS)
    assert (layers.groupby("config").size() == 23).all()  # model.0 .. model.22
    assert not layers.duplicated(["config", "layer"]).any()
    assert layers[["kineto_time_us", "ncu_time_us"]].notna().all().all()
    # Detect has the raw-output concat inside it: the head is one layer
    assert set(layers[layers.stage == "head"].module_type) == {"Detect"}


def test_kineto_and_ncu_agree_on_time_per_forward(layers):
    per = layers.groupby("config")[["kineto_time_us", "ncu_time_us"]].sum()
    ratio = per.ncu_time_us / per.kineto_time_us
    assert ((ratio > 0.85) & (ratio < 1.25)).all(), ratio  # ncu runs kernels one at a time


def test_theoretical_occupancy_ours_matches_ncu_layer_by_layer():
    """Ours (from Kineto's launch configs) and ncu's, as a multiset per layer: equal wherever both
    processes ran the same kernels. cuDNN's benchmark mode picks algorithms per process, so some
    layers differ (seen: 150 of 184 layers over the eight widths identical)."""
    k = datasets.load("h200/trace_width_b8")
    n = datasets.load("h200/ncu_width_b8")
    k = k[k.iteration == 0]
    same = total = 0
    for (c, layer), g in n.groupby(["config", "layer"]):
        ours = sorted(k[(k.config == c) & (k.layer == layer)].theoretical_occupancy_pct.round(1))
        total += 1
        same += ours == sorted(g.theoretical_occupancy_pct.round(1))
    assert total == 8 * 23 and same / total > 0.75


def test_achieved_never_exceeds_theoretical(layers):
    d = layers.ncu_achieved_occupancy_tw_pct - layers.ncu_theoretical_occupancy_tw_pct
    assert (d <= 0.5).all()


def test_gpm_medians_join_per_config(layers):
    g = layers.groupby("config").gpm_sm_occupancy_pct.nunique()
    assert (g <= 1).all()  # one GPU-wide value per config
    w15 = layers[layers.config == CONFIGS[1]].gpm_sm_occupancy_pct
    assert w15.isna().all()  # gpm_width_b16 ran batch 16: no b8 config to join


def test_summary_headlines(layers, tables):
    k, n, _ = tables
    s = suite.summary(layers, suite.unattributed(k, n), 26.0, 2, 0.1, {"mode": "gpm"})
    json.dumps(s)
    c = s["configs"][CONFIGS[1]]
    assert c["layers"] == 23 and c["slowest_layer"].startswith("model.")
    assert 0 < c["achieved_occupancy_tw_pct"] < c["theoretical_occupancy_tw_pct"] <= 100
    assert s["ncu_s_per_forward"] == 13.0
    assert c["ncu_time_ms_per_forward"] > s["configs"][CONFIGS[0]]["ncu_time_ms_per_forward"]


def test_shipped_profile_layers_came_from_the_same_join():
    shipped = datasets.load("h200/profile_layers")
    assert set(shipped.config) == set(CONFIGS)
    assert shipped.attrs["provenance"]["gpu_name"] == "NVIDIA H200"
    assert (shipped.groupby("config").size() == 23).all()


def test_overhead_is_the_median_paired_loss():
    rows = []
    for r, (on, off) in enumerate([(99.0, 100.0), (198.0, 200.0), (50.0, 40.0)]):
        rows += [{"round": r, "sampler": True, "img_per_s": on}]
        rows += [{"round": r, "sampler": False, "img_per_s": off}]
    assert gpm.overhead_pct(pd.DataFrame(rows)) == pytest.approx(1.0)


def test_shipped_gpm_overhead_is_small_on_the_gpu_bound_config():
    ov = datasets.load("h200/gpm_overhead")
    w15 = ov[ov.config == CONFIGS[1]]
    assert len(w15) == 16 and w15.sampler.sum() == 8
    assert abs(gpm.overhead_pct(w15)) < 1.0

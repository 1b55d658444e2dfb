"""Notebooks 03 and 05: the tables of yolo_sm.topics.batch.analyse / .timeline / .gpm on the shipped
tables, their figures, and their facts (CPU only)."""

import math

import pandas as pd
import pytest

from yolo_sm.analyse import gpm
from yolo_sm.contract import datasets
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.batch import report as batch_plots
from yolo_sm.topics.timeline import analyse as timeline
from yolo_sm.topics.timeline import report as timeline_plots


@pytest.fixture(scope="module")
def table():
    return batch.batch_table(
        pd.concat([datasets.load("h200/sweep_fp16_nhwc"), datasets.load("h200/sweep_1280")])
    )


@pytest.fixture(scope="module")
def trace():
    return datasets.load("h200/trace_batch_w1")


def test_parse_config():
    assert batch.parse_config("yolov8_w1.5_fp16_nhwc_b8") == {
        "family": "yolov8",
        "width": 1.5,
        "precision": "fp16",
        "layout": "nhwc",
        "batch": 8,
    }
    assert batch.parse_config("yolov8_w1_fp16_nhwc_b128")["batch"] == 128
    assert math.isnan(batch.parse_config("")["width"])
    # other families and non-config labels (views.scaling had a copy of this parser)
    assert batch.parse_config("wide_w2_bf16_nchw_b64")["width"] == 2.0
    assert math.isnan(batch.parse_config("profiled_forward")["width"])
    assert batch_plots.short_label("yolov8_w0.25_fp16_nhwc_b16", "width") == "w0.25"


def test_batch_table_and_saturation(table):
    t640 = table[table.imgsz == 640]
    assert len(t640) == 128  # complete grid: 8 widths x 2 backends x 8 batches, all ok
    assert (table.frac_of_best <= 1 + 1e-12).all() and (table.frac_of_best > 0).all()
    sat = batch.saturation(table, 0.9)
    assert len(sat) == len(table.groupby(["imgsz", "width", "backend"]))
    assert (sat.knee_batch <= sat.best_batch).all()
    assert (sat.knee_img_per_s >= 0.9 * sat.best_img_per_s - 1e-9).all()
    # a wider model saturates at a smaller (or equal) batch than the narrowest one
    e = sat[(sat.imgsz == 640) & (sat.backend == "eager")].sort_values("width")
    assert e.knee_batch.iloc[-1] <= e.knee_batch.iloc[0]
    assert (sat.gain_b1_to_best >= 1).all()


def test_graph_speedup_largest_at_batch_1(table):
    sp = batch.graph_speedup(table[table.imgsz == 640])
    assert len(sp) == 64
    for _, g in sp.groupby("width"):
        g = g.sort_values("batch")
        assert g.speedup.iloc[0] > 1.2  # launch-bound batch 1: the graph wins clearly
        assert g.speedup.iloc[0] == g.speedup.max()
        assert abs(g.speedup.iloc[-1] - 1) < 0.1  # batch 128: the GPU work hides the launches


def test_ncu_coverage():
    cov = batch.ncu_coverage(datasets.load("h200/ncu_batch_w1"))
    assert list(cov.batch) == [1, 4, 16, 64]
    for c in ("kernels_under_1_wave", "time_under_1_wave", "achieved_over_theoretical"):
        assert cov[c].between(0, 1).all(), c
    # larger batches: more waves, fewer kernels under one wave, higher achieved occupancy
    assert cov.median_waves.is_monotonic_increasing
    assert cov.kernels_under_1_wave.is_monotonic_decreasing
    assert cov.achieved_occupancy_tw_pct.is_monotonic_increasing
    assert (cov.achieved_occupancy_tw_pct <= cov.theoretical_occupancy_tw_pct + 1).all()


@pytest.mark.parametrize("name,n", [("h200/gpm_batch_w1", 5), ("h200/gpm_width_b16", 5)])
def test_gpm_medians(name, n):
    g = datasets.load(name)
    med = gpm.gpm_medians(g)
    assert len(med) == n
    for m in batch.GPM_METRICS:
        assert med[m].between(0, 100).all()
    assert (med.windows >= 20).all()  # ~3 s of ~0.1 s windows each
    w = gpm.gpm_wide(g)
    assert w.window_s.median() == pytest.approx(0.1, abs=0.01)  # GPM's 100 ms refresh
    spans = timeline.run_spans(w)
    assert len(spans) == n and (spans.t1_s > spans.t0_s).all()
    assert (spans.t0_s.iloc[1:].to_numpy() >= spans.t1_s.iloc[:-1].to_numpy()).all()


def test_gpm_sm_util_rises_with_batch():
    med = gpm.gpm_medians(datasets.load("h200/gpm_batch_w1")).sort_values("batch")
    assert med.sm_util_pct.iloc[-1] > 2 * med.sm_util_pct.iloc[0]


def test_memory_fit_and_rule(table):
    fit = batch.memory_fit(table)
    e = fit[(fit.imgsz == 640) & (fit.backend == "eager")].sort_values("width")
    assert len(e) == 8
    assert (e.r2 > 0.99).all()  # eager peak memory is linear in batch
    assert e.per_image_bytes.is_monotonic_increasing  # wider -> more activation memory
    mem = float(datasets.load("h200/sweep_fp16_nhwc").prov_gpu_memory_bytes.iloc[0])
    rule = batch.memory_budget(fit, mem, 0.7)
    expect = ((0.7 * mem - rule.intercept_bytes) / rule.per_image_bytes).map(math.floor)
    assert (rule.fitted_safe_batch == expect).all()
    assert rule.peak_at_max_batch_pct.tolist() == pytest.approx(
        (100 * rule.peak_at_max_batch_bytes / mem).tolist()
    )
    # the fit reproduces the largest measured point within 10 %
    pred = rule.intercept_bytes + rule.per_image_bytes * rule.max_batch
    e_rows = rule.backend == "eager"
    assert ((pred[e_rows] / rule.peak_at_max_batch_bytes[e_rows] - 1).abs() < 0.1).all()
    # 1280 px: about 4x the pixels, so more memory per image than at 640 px
    w1 = rule[(rule.width == 1.0) & (rule.backend == "eager")].set_index("imgsz")
    assert w1.per_image_bytes[1280] > 2.5 * w1.per_image_bytes[640]
    assert set(rule.columns) >= {"per_image_MB", "fitted_safe_batch"}


def test_build_vs_timed(table):
    b = batch.build_vs_timed(table)
    assert len(b) == table.build_peak_mem_bytes.notna().sum()
    assert (b.build_over_timed > 0).all()


def test_launch_gaps(trace):
    gaps = timeline.launch_gaps(trace)
    assert len(gaps) == trace.groupby(["config", "iteration"]).ngroups
    assert (gaps.kernel_us <= gaps.span_us + 1e-6).all()
    assert gaps.idle_frac.between(0, 1).all()
    per_batch = gaps.groupby("batch").idle_frac.mean()
    assert per_batch.is_monotonic_decreasing  # bigger kernels hide the launch gaps
    assert per_batch.loc[1] > 0.5
    g = timeline.kernel_gaps(trace)
    assert (g.gap_us.dropna() >= 0).all()
    assert g.gap_us.isna().sum() == len(gaps)  # the first kernel of each forward has no gap


def test_launch_vs_sweep(trace, table):
    out = timeline.launch_vs_sweep(timeline.launch_gaps(trace), table, 1.0)
    assert list(out.batch) == [1, 4, 16, 64]
    assert out.sweep_eager_ms.notna().all() and out.sweep_graph_ms.notna().all()
    # a CUDA graph replay takes about the summed kernel time of the traced forward
    assert out.graph_over_kernel_time.between(0.8, 1.3).all()
    # the profiler slows launches: the traced span exceeds the un-profiled eager latency at b1
    b1 = out.iloc[0]
    assert b1.trace_span_us > 1000 * b1.sweep_eager_ms
    assert 0 < b1.sweep_idle_frac < b1.trace_idle_frac
    # the sweep records its own GPU busy time: the idle share is one process's
    assert (out.idle_from == "sweep GPU busy time (same run)").all()
    assert b1.sweep_idle_frac == pytest.approx(1 - b1.sweep_eager_busy_ms / b1.sweep_eager_ms)
    # a sweep without it falls back to the trace's kernel time (another run)
    old = timeline.launch_vs_sweep(
        timeline.launch_gaps(trace), table.drop(columns="gpu_busy_ms"), 1.0
    )
    assert (old.idle_from == "trace kernel time").all()
    b1 = old.iloc[0]
    assert b1.sweep_idle_frac == pytest.approx(1 - b1.trace_kernel_us / 1000 / b1.sweep_eager_ms)
    assert b1.graph_over_kernel_time == pytest.approx(1000 * b1.sweep_graph_ms / b1.trace_kernel_us)
    # a sweep of eager points only (a model of one's own): the idle share, no graph figures
    eager = timeline.launch_vs_sweep(
        timeline.launch_gaps(trace), table[table.backend == "eager"], 1.0
    )
    assert eager.sweep_idle_frac.notna().all() and eager.graph_over_kernel_time.isna().all()


def test_figures(table, trace):
    g = datasets.load("h200/gpm_batch_w1")
    ncu = datasets.load("h200/ncu_batch_w1")
    t640 = table[table.imgsz == 640]
    fit = batch.memory_fit(table)
    figs = [
        batch_plots.plot_batch_curves(t640),
        batch_plots.plot_batch_detail(t640, 1.0, "eager", 0.9),
        batch_plots.plot_graph_speedup(batch.graph_speedup(t640)),
        batch_plots.plot_waves_ecdf(ncu),
        batch_plots.plot_occupancy_by_batch(batch.ncu_coverage(ncu)),
        batch_plots.plot_gpm_by(gpm.gpm_medians(g)),
        batch_plots.plot_memory(table, fit),
        timeline_plots.plot_kernel_timeline(trace),
        timeline_plots.plot_gap_hist(trace),
    ]
    assert all(len(f.data) > 0 for f in figs)
    tl = timeline_plots.plot_gpm_timeline(g)
    assert len(tl.layout.shapes) == 5 * 4  # each config's run shaded in each metric's panel
    with pytest.raises(ValueError):
        batch_plots.plot_batch_detail(t640, 9.0, "eager", 0.9)


def test_gpm_overhead_table_of_the_shipped_rounds():
    raw = datasets.load("h200/gpm_overhead")
    t = gpm.gpm_overhead_table(raw)
    assert sorted(t.index) == sorted(raw.config.unique())
    for config, g in raw.groupby("config"):
        assert t.throughput_lost_pct[config] == gpm.overhead_pct(g)
        assert t.rounds[config] == g["round"].nunique()
        assert t.img_per_s_without[config] == g[~g.sampler].img_per_s.median()


def test_memory_fit_adds_a_graphs_private_pool_where_measured():
    rows = [
        {
            "imgsz": 640,
            "width": 1.0,
            "backend": b,
            "batch": n,
            "peak_mem_bytes": 1e9 + 1e6 * n,
            "graph_pool_bytes": pool(n),
        }
        for n in (1, 2, 4, 8)
        for b, pool in (("eager", lambda n: None), ("cudagraph", lambda n: 5e7 * n))
    ]
    fit = batch.memory_fit(pd.DataFrame(rows)).set_index("backend")
    assert fit.loc["eager", "per_image_bytes"] == pytest.approx(1e6)
    assert fit.loc["cudagraph", "per_image_bytes"] == pytest.approx(1e6 + 5e7)  # pool counted
    assert fit.loc["cudagraph", "counts_activations"] and fit.loc["eager", "counts_activations"]
    # without the pool column (the shipped sweeps): the graph's fit misses its activations
    old = batch.memory_fit(pd.DataFrame(rows).drop(columns="graph_pool_bytes")).set_index("backend")
    assert not old.loc["cudagraph", "counts_activations"]
    assert old.loc["cudagraph", "per_image_bytes"] == pytest.approx(1e6)


def test_memory_fit_of_a_graph_sweep_resumed_across_code_versions():
    # batches 1-4 measured before the pool was recorded, 8-32 after: fit the pooled rows only
    rows = [
        {
            "imgsz": 640,
            "width": 1.0,
            "backend": "cudagraph",
            "batch": n,
            "peak_mem_bytes": 1e9 + 1e6 * n,
            "graph_pool_bytes": 5e7 * n if n >= 8 else None,
        }
        for n in (1, 2, 4, 8, 16, 32)
    ]
    fit = batch.memory_fit(pd.DataFrame(rows)).iloc[0]
    assert fit.counts_activations and fit.batches == 3
    assert fit.per_image_bytes == pytest.approx(1e6 + 5e7)
    one_pooled = [dict(r, graph_pool_bytes=None) if r["batch"] != 32 else r for r in rows]
    fit = batch.memory_fit(pd.DataFrame(one_pooled)).iloc[0]
    assert not fit.counts_activations and fit.batches == 5  # the unpooled rows


def test_graph_memory_compares_graph_and_eager_where_the_pool_is_counted():
    def rows(pooled: bool):
        return [
            {
                "imgsz": 640,
                "width": w,
                "backend": b,
                "batch": n,
                "peak_mem_bytes": (1e8 if b == "eager" else 2e8) + 1e6 * n * w,
                "graph_pool_bytes": (1e6 * n * w if pooled else None) if b == "cudagraph" else None,
            }
            for w in (0.5, 1.0)
            for b in ("eager", "cudagraph")
            for n in (1, 8, 64)
        ]

    gm = batch.graph_memory(batch.memory_fit(pd.DataFrame(rows(True))))
    assert list(gm.width) == [0.5, 1.0]
    assert gm.per_image_ratio.tolist() == pytest.approx([2.0, 2.0])  # the pool doubles it
    assert gm.graph_intercept_MB.tolist() == pytest.approx([200.0, 200.0])
    assert (gm.max_batch == 64).all()
    at64 = (2e8 + 2 * 1e6 * 64) / (1e8 + 1e6 * 64)
    assert gm.footprint_ratio_at_max.iloc[1] == pytest.approx(at64)
    # graph rows without their pool do not count the activations: nothing to compare
    none = batch.graph_memory(batch.memory_fit(pd.DataFrame(rows(False))))
    assert none.empty


def test_graph_memory_on_the_shipped_pooled_sweep():
    d = datasets.load("h200/sweep_bf16_nhwc")
    gm = batch.graph_memory(batch.memory_fit(batch.batch_table(d[d.precision == "fp16"])))
    assert len(gm) == d.width.nunique()
    # with the pool counted a graph holds at least eager's peak at the largest batch
    assert (gm.footprint_ratio_at_max > 0.95).all()

"""Width and precision views (notebooks 01 and 02) on the shipped H200 data."""

import pandas as pd
import pytest

from yolo_sm.analyse import scaling
from yolo_sm.contract import datasets, hardware
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import with_config
from yolo_sm.report import scaling_plots


@pytest.fixture(scope="module")
def sweep():
    return datasets.load("h200/sweep_fp16_nhwc")


@pytest.fixture(scope="module")
def ncu_width():
    return datasets.load("h200/ncu_width_b8")


@pytest.fixture(scope="module")
def precision_sweep():
    return datasets.load("h200/sweep_precision_core")


@pytest.fixture(scope="module")
def ncu_precision():
    return datasets.load("h200/ncu_precision_w1")


@pytest.fixture(scope="module")
def wide():
    return scaling.wide_stack_table(datasets.load("h200/ncu_wide_stack"))


def test_flops_follow_width_squared(sweep):
    f = scaling.flops_by_width(sweep)
    assert len(f) == 8 and f.width.is_monotonic_increasing
    assert f.set_index("width").flops_vs_width1[1.0] == 1.0
    big = f[f.width >= 1.0]
    assert (abs(big.flops_vs_width1 / big.width_sq_vs_width1 - 1) < 0.02).all()


def test_throughput_table_and_peak_share(sweep):
    t = scaling.throughput_table(sweep, hardware.PEAK_FP16_TFLOPS)
    assert len(t) == (sweep.status == "ok").sum()
    assert t.peak_frac.between(0, 1).all()
    # TFLOP/s = FLOPs per image x img/s; the share uses the given peak
    row = t.iloc[0]
    assert row.peak_frac == pytest.approx(row.tflops / hardware.PEAK_FP16_TFLOPS)
    g = t[(t.backend == "cudagraph") & (t.batch == 64)].sort_values("width")
    assert g.tflops.is_monotonic_increasing  # wider models do more work per second
    assert g.img_per_s.is_monotonic_decreasing
    fig = scaling_plots.plot_width_lines(t, y="peak_frac", log_y=False)
    assert len(fig.data) == t.batch.nunique() * t.backend.nunique()


def test_width_occupancy_per_config(ncu_width):
    occ = scaling.width_occupancy(ncu_width)
    assert list(occ.width) == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    assert (occ.batch == 8).all()
    for c in ("theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct"):
        assert occ[c].between(0, 100).all()
    assert (occ.achieved_occupancy_tw_pct <= occ.theoretical_occupancy_tw_pct).all()
    assert occ.sm_coverage_tw.between(0, 1).all()
    # kernel time per forward grows with width
    assert occ.time_us.is_monotonic_increasing
    assert len(scaling_plots.plot_width_occupancy(occ).data) == 4


def test_class_occupancy_shares_sum_to_one(ncu_width):
    cls = scaling.class_occupancy(ncu_width)
    assert cls.groupby("config").time_share.sum().round(9).eq(1).all()
    tc = cls[cls.kernel_class == "tensor_core_conv"]
    assert len(tc) == 8 and tc.theoretical_occupancy_tw_pct.lt(50).all()
    assert len(scaling_plots.plot_class_occupancy(cls).data) > 0


def test_speed_vs_occupancy_join(sweep, ncu_width):
    t = scaling.throughput_table(sweep, hardware.PEAK_FP16_TFLOPS)
    sv = scaling.speed_vs_occupancy(t, scaling.width_occupancy(ncu_width), batch=8)
    assert len(sv) == 8 and sv.notna().all().all()


def test_wide_stack_limits_explain_occupancy(wide):
    assert sorted(wide.width.unique()) == [1.0, 1.25, 1.5, 1.75, 2.0]
    assert wide.groupby("config").time_share.sum().round(9).eq(1).all()
    # theoretical occupancy = blocks allowed by the tightest limit x warps per block / 64 warps
    blocks = wide[list(scaling.LIMITS)].min(axis=1)
    expected = (blocks * wide.block_size / 32 / 64 * 100).clip(upper=100)
    assert (abs(expected - wide.theoretical_occupancy_tw_pct) < 0.01).all()
    main = wide[wide.kernel_class == "tensor_core_conv"]
    main = main.loc[main.groupby("width").time_us.idxmax()]
    assert main.block_size.nunique() == 1  # the block does not widen with the layer
    assert set(main.limiter) <= {"registers = shared_mem", "registers", "shared_mem"}
    assert main.sort_values("width").tensor_pipe_tw_pct.iloc[-1] > main.tensor_pipe_tw_pct.min()
    assert len(scaling_plots.plot_wide_stack(wide).data) == 3 * wide.kernel_family.nunique()


def test_width_findings_are_computed(sweep, ncu_width, wide):
    t = scaling.throughput_table(sweep, hardware.PEAK_FP16_TFLOPS)
    occ = scaling.width_occupancy(ncu_width)
    text = scaling_plots.width_findings(
        t,
        occ,
        scaling.class_occupancy(ncu_width),
        wide,
        scaling.flops_by_width(sweep),
        peak_tflops=hardware.PEAK_FP16_TFLOPS,
    )
    assert "nan" not in text.lower() and "Wide conv stack" in text
    assert f"{hardware.PEAK_FP16_TFLOPS:.0f} TFLOP/s" in text


def test_precision_speedup_same_run(precision_sweep):
    sp = scaling.precision_speedup(precision_sweep)
    assert set(sp.precision) <= {"tf32", "fp16", "bf16"} and sp.ratio.notna().all()
    # every ratio has both latencies in the sweep
    ok = precision_sweep.set_index(["width", "layout", "batch", "backend", "precision"]).median_ms
    r = sp.iloc[0]
    key = (r.width, r.layout, r.batch, r.backend)
    assert r.ratio == pytest.approx(ok[(*key, "fp32")] / ok[(*key, r.precision)])
    big = sp[(sp.batch == 64) & sp.precision.isin(["fp16", "bf16"])]
    assert (big.ratio > 1).all()  # 16-bit beats fp32 once the batch fills the GPU
    assert len(scaling_plots.plot_precision_speedup(sp).data) > 0


def test_missing_points_complete_the_plan(precision_sweep):
    # a partial table (the shipped one without its width-2.0 rows and one more point)
    partial = precision_sweep[precision_sweep.width != 2.0].iloc[1:]
    m = scaling.missing_points(partial)
    planned = int(m.planned.iloc[0])
    assert planned == 192  # 8 widths x 4 precisions x 2 backends x 3 batches
    assert m.points.sum() + len(partial) == planned
    assert set(m.step) == {"sweep_precision_core"}
    assert any("2" in w.split(", ") for w in m.widths)
    # dropping a measured point makes it missing
    fewer = partial.iloc[1:]
    assert scaling.missing_points(fewer).points.sum() == m.points.sum() + 1
    # two steps: their planned points add up, each missing group names its step
    both = scaling.missing_points(partial, step=["sweep_precision_core", "sweep_precision_rest"])
    assert int(both.planned.iloc[0]) == 192 + 128
    rest = both[both.step == "sweep_precision_rest"]
    assert rest.points.sum() == 128 and set(rest.batches) == {"16, 128"}  # none of it shipped
    assert list(dict.fromkeys(both.step))[-1] == "sweep_precision_rest"  # in the steps' order
    with pytest.raises(UserError, match="no step sweep_nope"):
        scaling.missing_points(precision_sweep, step=["sweep_nope"])
    # an empty table: every planned point is missing
    assert scaling.missing_points(precision_sweep.iloc[:0]).points.sum() == 192
    # a complete table: nothing missing
    from yolo_sm.collect import plans as collect
    from yolo_sm.collect.sweep import SweepSpec

    plan = collect.load_plan(datasets.data_dir() / "plans" / "h200.yaml")
    step = next(x for x in plan.steps if x.name == "sweep_precision_core")
    pts = SweepSpec.from_mapping({"device": plan.device, **step.params}).points()
    full = pd.DataFrame(
        [
            {
                "width": p.width,
                "precision": p.precision,
                "layout": p.layout,
                "backend": p.backend,
                "batch": p.batch,
            }
            for p in pts
        ]
    )
    done = scaling.missing_points(full)
    assert done.empty and list(done.columns[:2]) == ["step", "precision"]
    assert "planned" in done.columns


def test_pair_findings_against_fp16(precision_sweep):
    sp = scaling.precision_speedup(precision_sweep, baseline="fp16")
    text = scaling_plots.pair_findings(sp, "fp16")
    assert "**bf16 over fp16** (NCHW" in text and "**fp32 over fp16**" in text
    b = sp[(sp.precision == "bf16") & (sp.backend == "cudagraph")]
    lo = b[b.batch == b.batch.min()].ratio
    assert f"cudagraph batch {b.batch.min():.0f} {lo.min():.2f}-{lo.max():.2f}x" in text
    fig = scaling_plots.plot_precision_speedup(sp, baseline="fp16")
    assert "over fp16" in fig.layout.title.text
    assert scaling_plots.pair_findings(sp.iloc[:0], "fp16").startswith("No point")


def test_precision_forward_kernel_mix(ncu_precision):
    fwd = scaling.precision_forward(ncu_precision).set_index(["precision", "layout"])
    assert len(fwd) == 8
    assert fwd.loc[("fp32", "nchw"), "simt_share"] > 0.5
    assert fwd.loc[("fp32", "nchw"), "tensor_core_share"] == 0
    assert fwd.loc[("fp16", "nhwc"), "tensor_core_share"] > 0.2
    assert fwd.loc[("fp16", "nhwc"), "layout_transform_share"] == 0
    assert fwd.loc[("fp16", "nchw"), "layout_transform_kernels"] > 0
    assert fwd.loc[("fp16", "nhwc"), "time_ms"] < fwd.loc[("fp32", "nchw"), "time_ms"]
    shares = scaling.precision_class_shares(ncu_precision)
    assert shares.groupby("config").time_share.sum().round(9).eq(1).all()
    mm = scaling.precision_matmul(ncu_precision)
    assert mm.registers_per_thread_tw.between(1, 255).all()
    assert (
        len(scaling_plots.plot_precision_forward(scaling.precision_forward(ncu_precision)).data)
        == 3
    )


def test_error_table_against_tolerance(precision_sweep, sweep):
    e = scaling.error_table(precision_sweep, sweep).set_index(["precision", "layout"])
    assert e.loc[("fp32", "nchw"), "max"] == 0  # fp32 eager against itself
    assert (e["max"] <= e.tolerance).all()  # rows above tolerance would be status=error
    assert e.loc[("bf16", "nchw"), "median"] > e.loc[("fp16", "nchw"), "median"]
    assert e.loc[("fp16", "nhwc"), "points"] == (sweep.status == "ok").sum()
    assert len(scaling_plots.plot_rel_err(precision_sweep, sweep).data) > 0


def test_precision_findings_are_computed(precision_sweep, sweep, ncu_precision):
    def findings(sw):
        return scaling_plots.precision_findings(
            scaling.precision_speedup(sw),
            scaling.missing_points(sw),
            scaling.precision_forward(ncu_precision),
            scaling.precision_matmul(ncu_precision),
            scaling.error_table(sw, sweep),
            pd.DataFrame({"precision": ["fp16"], "rel_err": [1e-3]}),
        )

    text = findings(precision_sweep)
    assert "nan" not in text.lower()
    assert "Still missing" not in text  # the shipped core sweep is whole
    text = findings(precision_sweep[precision_sweep.width != 2.0])
    assert "Still missing" in text and "sweep_precision_core" in text
    assert "widths 0.25-1.75" in text  # the ratios cover only what both sides measured


def test_presets_table_and_findings_of_the_shipped_presets():
    from yolo_sm.analyse import scaling
    from yolo_sm.contract import datasets
    from yolo_sm.report import scaling_plots

    raw = datasets.load("h200/sweep_presets")
    t = scaling.presets_table(raw, 650.0)
    assert len(t) == len(raw) and set(t.scale) <= set("nsmlx")
    ok = t[t.status == "ok"]
    assert (ok.peak_frac == ok.tflops / 650.0).all() and (ok.gflops_per_img > 0).all()
    # within a family, precision, backend and batch the presets run n -> x, FLOPs rising
    for _, g in t.groupby(["family", "precision", "backend", "batch"]):
        assert g.gflops_per_img.is_monotonic_increasing
    text = scaling_plots.presets_findings(t)
    bad = int((t.status != "ok").sum())
    assert (f"**{bad} point(s) without figures**" in text) == (bad > 0)
    fig = scaling_plots.plot_presets(t, batch=64)
    assert len(fig.data) >= 1


def _bench_unit(width, batch, ratios):
    """A synthetic bench unit: eager at 100 img/s, each variant at 100 x its ratio (None: a
    failed row)."""
    rows = [
        {
            "width": width,
            "batch": batch,
            "variant": "eager/fp16/nhwc",
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
                "scope": "model_only",
                "status": "ok" if r is not None else "error",
                "img_per_s": 100.0 * r if r is not None else float("nan"),
                "vs_baseline": r if r is not None else float("nan"),
            }
        )
    return rows


def test_compile_by_width_pairs_each_unit_and_findings_follow_the_data():
    g, c, ro = "cudagraph/fp16/nhwc", "compile/fp16/nhwc", "compile:reduce-overhead/fp16/nhwc"
    bench = pd.DataFrame(
        _bench_unit(0.5, 1, {g: 4.0, c: 1.5, ro: 6.0})
        + _bench_unit(2.0, 1, {g: 2.0, c: 1.6, ro: 3.0})
        + _bench_unit(0.5, 64, {g: 1.02, c: 1.9, ro: None})
        + _bench_unit(2.0, 64, {g: 1.01, c: 1.4, ro: 1.4})
        + [
            {
                "width": 0.5,
                "batch": 64,
                "variant": "cudagraph/fp8/nhwc",
                "scope": "model_only",
                "status": "ok",
                "img_per_s": 500.0,
                "vs_baseline": 5.0,
            }
        ]
    )
    t = scaling.compile_by_width(bench)
    assert list(t.columns) == [
        "width",
        "batch",
        "eager_img_per_s",
        "CUDA graph",
        "compile",
        "compile reduce-overhead",
    ]
    row = t.set_index(["width", "batch"]).loc[(0.5, 64)]
    assert row["compile"] == 1.9 and pd.isna(row["compile reduce-overhead"])  # failed: empty
    assert row["eager_img_per_s"] == 100.0
    text = scaling_plots.compile_findings(t)
    assert "falls with width: 1.90x at w0.5, 1.40x at w2" in text
    assert "below compile everywhere" in text
    assert "removing launches pays more" in text and "3.00-6.00x" in text
    # the other way round: compile gaining with width, a graph beating compile at batch 64
    flipped = pd.DataFrame(
        _bench_unit(0.5, 64, {g: 2.0, c: 1.2}) + _bench_unit(2.0, 64, {g: 1.0, c: 1.5})
    )
    text = scaling_plots.compile_findings(scaling.compile_by_width(flipped))
    assert "does not fall" in text and "not below compile at every width" in text
    assert scaling_plots.plot_compile_by_width(bench).data  # a figure with traces
    sweep = pd.DataFrame(
        [
            {
                "width": 0.5,
                "batch": 1,
                "backend": "eager",
                "precision": "fp16",
                "layout": "nhwc",
                "status": "ok",
                "img_per_s": 200.0,
            },
            {
                "width": 2.0,
                "batch": 1,
                "backend": "cudagraph",
                "precision": "fp16",
                "layout": "nhwc",
                "status": "ok",
                "img_per_s": 50.0,
            },
        ]
    )
    assert "batch 1 0.50-0.50x" in scaling_plots.compile_findings(t, sweep)  # eager 100 vs 200
    assert scaling_plots.compile_findings(t.iloc[:0]) == "No torch.compile rows in the bench yet."


def test_compile_by_width_of_the_shipped_bench():
    t = scaling.compile_by_width(datasets.load("h200/bench_fast_engines"))
    assert {1, 16, 64} <= set(t.batch) and t["compile"].notna().sum() >= 3
    assert "Batch 64" in scaling_plots.compile_findings(t)


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


def test_bench_check_errors_reads_failed_checks_from_their_message():
    g = scaling.bench_check_errors(_fp8_bench()).set_index("width")
    # batch 1 (one photo) is left out: batch 16 and 64 check on the four images
    assert g.loc[0.5, "gpu_err_min"] == 0.148 and g.loc[0.5, "gpu_err_max"] == 0.15
    assert g.loc[0.5, "failed"] == 2 and g.loc[1.0, "failed"] == 0
    assert g.loc[1.0, "gpu_err_max"] == 0.085
    allb = scaling.bench_check_errors(_fp8_bench(), min_batch=1).set_index("width")
    assert allb.loc[0.5, "gpu_err_max"] == 0.2
    assert scaling.bench_check_errors(_fp8_bench(), variant="nope").empty


def test_fp8_error_table_and_findings_compare_cpu_and_h200():
    cpu = pd.DataFrame(
        [
            {"width": w, "precision": p, "class_prior": prior, "imgsz": 640, "rel_err": e}
            for w, scale in ((0.5, 4.0), (1.0, 1.0))
            for prior, fp8 in ((False, 0.01), (True, 0.08))
            for p, e in (("fp16", 0.0003 * scale), ("bf16", 0.003 * scale), ("fp8", fp8 * scale))
        ]
    )
    t = scaling.fp8_error_table(cpu, _fp8_bench())
    assert list(t.columns[:4]) == ["width", "fp16", "bf16", "fp8"]
    assert "fp8, class prior" in t and "fp8 H200 (class prior), max" in t
    text = scaling_plots.fp8_error_findings(t, tolerance=0.1)
    # H200 0.15 vs CPU 0.32 at w0.5: more than 20 % apart -> said so
    assert "width 0.5 15.0% vs 32.0%" in text and "differ by more than 20 %" in text
    assert "amplifies rounding" in text and "fp16 4.0x, bf16 4.0x, fp8 4.0x" in text
    assert "at batch 16, 64" in text  # the batches the H200 figures come from (batch 1 left out)
    flat = cpu.assign(rel_err=0.01)  # the same error at every width: no amplification claimed
    assert "amplifies" not in scaling_plots.fp8_error_findings(scaling.fp8_error_table(flat))
    close = cpu.assign(
        rel_err=lambda d: d.rel_err.where(~(d.class_prior & (d.width == 0.5)), 0.149)
    )
    t2 = scaling.fp8_error_table(close, _fp8_bench())
    assert "within 20 % of the emulation" in scaling_plots.fp8_error_findings(t2, tolerance=0.1)
    assert "H200" not in "".join(scaling.fp8_error_table(cpu).columns)  # no bench: CPU only


def test_presets_findings_flag_a_costlier_preset_measured_faster():
    def row(scale, gflops, img_per_s, backend="eager", batch=8):
        return {
            "family": "yolov8",
            "scale": scale,
            "precision": "fp16",
            "backend": backend,
            "batch": batch,
            "status": "ok",
            "gflops_per_img": gflops,
            "img_per_s": img_per_s,
            "tflops": gflops * img_per_s / 1e3,
            "message": "",
        }

    t = pd.DataFrame(
        [
            row("n", 8, 1300),
            row("s", 28, 1500),
            row("m", 79, 900),
            row("n", 8, 9000, "cudagraph", 64),
            row("s", 28, 4000, "cudagraph", 64),
        ]
    )
    text = scaling_plots.presets_findings(t)
    assert "**1 point(s) run faster than a preset with fewer FLOPs**" in text
    assert "yolov8 fp16 eager batch 8: s 1,500 img/s > n 1,300" in text
    assert "1 of them are eager at batch 8 or less" in text
    monotone = t[t.scale != "s"]
    assert "run faster" not in scaling_plots.presets_findings(monotone)


def test_measurement_runs_split_at_gaps():
    times = [
        "2026-11-30T10:00:00",
        "2026-11-30T10:04:00",
        "2026-11-30T10:09:00",
        "2026-11-30T11:30:00",
        "2026-11-30T11:31:00",
    ]
    assert scaling.measurement_runs(times) == (2, "2026-11-30 10:00", "11:31 UTC")
    assert scaling.measurement_runs(times[:3])[0] == 1  # 5-minute gaps: one run
    assert scaling.measurement_runs(times, gap_minutes=4.5)[0] == 3
    assert scaling.measurement_runs([]) == (0, "", "")


def test_precision_layer_delta_and_findings(ncu_precision):
    d = scaling.precision_layer_delta(ncu_precision, "bf16", "fp16", layout="nhwc")
    k = with_config(ncu_precision)
    for prec in ("bf16", "fp16"):
        one = k[(k.precision == prec) & (k.layout == "nhwc")]
        assert d[f"{prec}_us"].sum() == pytest.approx(one.duration_us.sum())
    assert (d.delta_us == d.bf16_us.fillna(0) - d.fp16_us.fillna(0)).all()
    assert d.delta_us.abs().is_monotonic_decreasing
    ratios = pd.DataFrame(
        {
            "precision": "bf16",
            "backend": "cudagraph",
            "width": [0.25, 0.25, 2.0],
            "batch": [16, 64, 16],
            "ratio": [0.9, 0.94, 1.02],
        }
    )
    text = scaling_plots.layer_delta_findings(d, ratios)
    top = d.iloc[0]
    assert f"`{top.layer}`, {top.delta_us:+.0f} us" in text
    assert "w0.25 0.92x, w2 1.02x" in text
    # a layer whose kernels change class is named with both
    swapped = d[d.classes_bf16 != d.classes_fp16]
    assert all(f"`{layer}`" in text for layer in swapped.layer)
    assert scaling.precision_layer_delta(k[k.precision != "bf16"]).empty
    assert "No Nsight Compute forward" in scaling_plots.layer_delta_findings(d.iloc[:0], ratios)

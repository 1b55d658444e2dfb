"""yolo_sm.analyse.roofline: counted bytes and FLOPs, rooflines, layout and launch views over the
shipped H200 data (CPU only)."""

import re

import pandas as pd
import pytest

from yolo_sm.analyse import roofline
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.collect.models import view_tables
from yolo_sm.contract import datasets
from yolo_sm.contract.errors import UserError
from yolo_sm.report import roofline_plots


@pytest.fixture(scope="module")
def ncu_yolo():
    return datasets.load("h200/ncu_width_b8")


@pytest.fixture(scope="module")
def roof(ncu_yolo):
    return roofline.roofline_table(ncu_yolo, [0.25])


@pytest.fixture(scope="module")
def resnet():
    return add_kernel_class(datasets.load("h200/ncu_resnet101"))


@pytest.fixture(scope="module")
def stages(resnet):
    return roofline.resnet_stages(resnet)


@pytest.fixture(scope="module")
def trace():
    return datasets.load("h200/trace_width_b8")


def test_parse_config():
    c = roofline.parse_config("yolov8_w1.5_fp16_nhwc_b8")
    assert c == {
        "family": "yolov8",
        "width": 1.5,
        "precision": "fp16",
        "layout": "nhwc",
        "batch": 8,
    }
    assert roofline.parse_config("resnet101_w1_fp16_nhwc_b8")["family"] == "resnet101"
    with pytest.raises(ValueError):
        roofline.parse_config("not a config")


def test_default_peaks_come_from_claims():
    from yolo_sm.contract import datasets
    from yolo_sm.contract.hardware import peak_copy_gbps, peak_fp16_tflops

    assert roofline.default_peaks() == (peak_fp16_tflops()[0], peak_copy_gbps()[0])
    assert "not measured by yolo_sm" in roofline_plots.REFERENCE_NOTE
    if "h200/ceilings" in datasets.list_datasets().name.tolist():  # shipped: the measured ceilings
        c = datasets.load("h200/ceilings").set_index("ceiling").value
        assert roofline.default_peaks() == (c["matmul_fp16"], c["copy_d2d"])
        assert "measured by yolo_sm" in peak_fp16_tflops()[1]


def test_layer_traffic_counts_bytes_consistently():
    from yolo_sm.collect.models import model_flops

    m = view_tables.yolo_model(0.25)
    t = view_tables.layer_traffic(m, 640, batch=4)
    assert len(t) == 23
    assert t.flops_batch.sum() == 4 * model_flops(m)
    by = t.set_index("layer")
    # a chain: model.1's input is model.0's output; the first conv reads the 3-channel image
    assert by.loc["model.1", "in_bytes"] == by.loc["model.0", "out_bytes"]
    assert by.loc["model.0", "in_bytes"] == 4 * 3 * 640 * 640 * 2
    # Concat reads its inputs and writes the same number of elements, no FLOPs, no weights
    cat = by.loc["model.11"]
    assert cat.flops == 0 and cat.in_bytes == cat.out_bytes and cat.conv_bytes == 0
    assert (t.min_bytes == t.weight_bytes + t.in_bytes + t.out_bytes).all()
    # a C2f's convs move at least what the layer does at its boundary (internal tensors too)
    c2f = t[t.module_type == "C2f"]
    assert (c2f.conv_bytes >= c2f.min_bytes).all()
    assert (c2f.intensity >= c2f.conv_intensity).all()


def test_roofline_table_joins_time_and_stays_under_the_roof(ncu_yolo, roof):
    assert len(roof) == 23 and set(roof.width) == {0.25}
    times = ncu_yolo[ncu_yolo.config == "yolov8_w0.25_fp16_nhwc_b8"].groupby("layer").duration_us
    r = roof.set_index("layer")
    assert r.time_us.to_dict() == pytest.approx(times.sum().to_dict())
    assert r.kernels.sum() == len(ncu_yolo[ncu_yolo.config == "yolov8_w0.25_fp16_nhwc_b8"])
    flop = roof[roof.flops > 0]
    assert (flop.achieved_tflops > 0).all() and (flop.pct_of_roof <= 100).all()
    assert (flop.achieved_tflops <= roof.attrs["peak_tflops"]).all()
    assert roof.attrs["ridge"] == pytest.approx(
        roof.attrs["peak_tflops"] * 1e3 / roof.attrs["peak_gbps"]
    )
    assert (roof[roof.flops == 0].side == "memory").all()
    # achieved GB/s times time gives back the counted bytes
    back = roof.achieved_gbps * roof.time_us * 1e3
    assert back.to_numpy() == pytest.approx(roof.min_bytes.to_numpy().astype(float))


def test_roofline_ceilings_are_parameters(ncu_yolo, roof):
    other = roofline.roofline_table(ncu_yolo, [0.25], peak_tflops=100.0, peak_gbps=1000.0)
    assert other.attrs["ridge"] == pytest.approx(100.0)
    assert other.achieved_tflops.to_numpy() == pytest.approx(roof.achieved_tflops.to_numpy())
    assert (other.pct_of_roof.dropna() >= roof.pct_of_roof.dropna()).all()
    with pytest.raises(ValueError):
        roofline.roofline_table(ncu_yolo, [3.0])


def test_side_summary(roof):
    s = roofline.side_summary(roof)
    assert len(s) == 1 and s.layers.iloc[0] == 23
    assert 0 <= s.memory_side_time_share.iloc[0] <= 1
    assert 0 < s.pct_of_roof_tw.iloc[0] < 100


def test_bound_of():
    assert roofline.bound_of(50, 80) == "memory-bound"
    assert roofline.bound_of(80, 50) == "compute-bound"
    assert roofline.bound_of(40, 30).startswith("neither")
    assert roofline.bound_of(70, 70) == "memory-bound"  # tie: DRAM wins
    assert list(roofline.bound_of(pd.Series([90, 10]), pd.Series([10, 90]))) == [
        "compute-bound",
        "memory-bound",
    ]


def test_resnet_stages(resnet, stages):
    from yolo_sm.collect.models import model_flops

    assert list(stages.layer) == ["stem", "layer1", "layer2", "layer3", "layer4", "head"]
    assert stages.kernels.sum() == (resnet.layer != "").sum()
    assert stages.flops_batch.sum() == 8 * model_flops(view_tables.resnet_model(101))
    shares = stages[[c for c in stages if c.startswith("time_share_")]]
    assert shares.sum(axis=1).to_numpy() == pytest.approx(1.0)
    for c in ("sm_throughput_tw_pct", "dram_throughput_tw_pct", "tensor_pipe_tw_pct"):
        assert stages[c].between(0, 100).all()
    # layer3 holds most of ResNet-101's FLOPs (23 of its 33 bottlenecks)
    assert stages.set_index("layer").flops_batch.idxmax() == "layer3"


def test_resnet_claim_is_consistent(stages):
    c = roofline.resnet_claim(stages)
    assert c["verdict"] in ("holds", "partly holds", "does not hold")
    assert c["direction_right"] == (
        c["early_dram_pct"] > c["deep_dram_pct"] and c["deep_tensor_pct"] > c["early_tensor_pct"]
    )
    if c["max_stage_dram_pct"] < c["high_pct"]:
        assert not c["early_memory_bound"] and c["verdict"] != "holds"


def test_throughput_view_wide_stack():
    wide = roofline.with_config(datasets.load("h200/ncu_wide_stack"))
    v = roofline.throughput_view(wide, ["width", "stage"])
    assert len(v) == wide.width.nunique() * wide.stage.nunique()
    assert v.time_us.sum() == pytest.approx(wide.duration_us.sum())
    assert set(v.bound) <= set(roofline.BOUNDS)


def test_layout_compare():
    lay = roofline.layout_compare(add_kernel_class(datasets.load("h200/ncu_precision_w1")), "fp16")
    by = lay.set_index("layout")
    assert set(by.index) == {"nchw", "nhwc"}
    assert by.loc["nhwc", "time_vs_nhwc"] == 1.0
    assert by.loc["nhwc", "transform_kernels"] == 0
    assert by.loc["nchw", "transform_kernels"] > 0
    assert 0 < by.loc["nchw", "transform_time_share"] < 1


def test_launch_views(trace):
    per = roofline.launches_per_type(trace, 0)
    it0 = trace[trace.iteration == 0]
    assert per.kernels.sum() == len(it0)
    assert per.groupby("config").launch_share.sum().to_numpy() == pytest.approx(1.0)
    f = roofline.fusion_bound(trace, 0, "C2f")
    assert len(f) == it0.config.nunique()
    assert (f.C2f_launches <= f.launches).all()
    assert (f.removed_share < f.C2f_launch_share).all()
    assert (f.all_layers_removed_share >= f.removed_share).all()
    assert (f.C2f_layers == 8).all()  # YOLOv8 has 8 C2f blocks at any width


def _kernels(config, iterations, per_iteration_us):
    """A Kineto-like table: ``iterations`` forwards of ``config``, one row per kernel."""
    return pd.DataFrame(
        [
            {"config": config, "iteration": i, "duration_us": d, "kernel_name": f"k{j}"}
            for i in range(iterations)
            for j, d in enumerate(per_iteration_us)
        ]
    )


def test_fusion_measured_counts_per_forward():
    k = pd.concat(
        [_kernels("eager", 2, [10.0] * 8), _kernels("compile", 3, [20.0, 20.0, 10.0])],
        ignore_index=True,
    )
    f = roofline.fusion_measured(k).set_index("engine")
    assert f.loc["eager", "launches"] == 8 and f.loc["compile", "launches"] == 3  # per forward
    assert f.loc["eager", "kernel_ms"] == pytest.approx(0.08)
    assert f.loc["compile", "kernel_ms"] == pytest.approx(0.05)
    assert f.loc["compile", "removed_launch_share"] == pytest.approx(5 / 8)
    assert f.loc["compile", "removed_time_share"] == pytest.approx(3 / 8)
    assert f.loc["eager", "removed_launch_share"] == 0
    with pytest.raises(UserError, match="no kernels of tensorrt"):
        roofline.fusion_measured(k, fused="tensorrt")


def test_fusion_measured_of_the_shipped_compile_trace(trace):
    from yolo_sm.analyse import fast

    both = fast.compare_backends(
        {
            "eager": datasets.load("h200/trace_fp8_w1_b64"),
            "compile": datasets.load("h200/trace_compile_w1_b64"),
        },
        "yolov8_w1_fp16_nhwc_b64",
    )
    f = roofline.fusion_measured(both).set_index("engine")
    # inductor fuses elementwise kernels but keeps cuDNN's convolutions: fewer launches, not
    # as few as one kernel per C2f block (the bound from the batch-8 trace)
    assert f.loc["compile", "launches"] < f.loc["eager", "launches"]
    bound = roofline.fusion_bound(trace)
    assert f.loc["compile", "removed_launch_share"] < bound.removed_share.min()


def test_launch_cost(trace):
    sweep = datasets.load("h200/sweep_fp16_nhwc")
    c1 = roofline.launch_cost(sweep, trace, 1)
    assert "gpu_kernel_ms" not in c1  # the trace is batch 8: no kernel time for batch 1
    counts = trace[trace.iteration == 0].groupby("config").size()
    assert set(c1.kernels_per_forward) <= set(counts)
    c8 = roofline.launch_cost(sweep, trace, 8)
    assert c8.attrs["batch"] == 8
    assert (c8.gpu_kernel_ms > 0).all() and (c8.gpu_idle_share_eager < 1).all()


def test_activation_table():
    act = view_tables.activation_table([0.25])
    assert len(act) == 23
    # model.0 (stride 2, 16 channels at width 0.25) outputs 16 x 320 x 320 fp16 per image
    row = act.set_index("layer").loc["model.0"]
    assert row.activation_bytes == 16 * 320 * 320 * 2


def test_plots_return_figures(roof, stages, resnet, trace):
    fig = roofline_plots.plot_roofline(roof)
    names = [t.name or "" for t in fig.data]
    assert any(n.startswith("roof") for n in names) and any("ridge" in n for n in names)
    note = fig.layout.annotations[-1].text  # says where the roofs come from
    assert "measured by yolo_sm" in note or "not measured" in note
    assert roofline_plots.plot_layer_heatmap(roof).data[0].type == "heatmap"
    assert len(roofline_plots.plot_stage_bars(stages).data) == 4
    assert roofline_plots.plot_normalised_roofline(resnet).data
    assert roofline_plots.plot_launches(roofline.launches_per_type(trace)).data
    assert roofline_plots.plot_activations(view_tables.activation_table([0.25])).data


def test_findings_markdown_has_no_missing_numbers(ncu_yolo, roof, stages, resnet, trace):
    sweep = datasets.load("h200/sweep_fp16_nhwc")
    wide = roofline.with_config(datasets.load("h200/ncu_wide_stack"))
    text = roofline_plots.findings_markdown(
        stages=stages,
        claim=roofline.resnet_claim(stages),
        resnet=resnet,
        wide_blocks=roofline.throughput_view(wide, ["width", "stage", "layer"]),
        roof=roof,
        sides=roofline.side_summary(roof),
        act=view_tables.activation_table([0.25]),
        layout=roofline.layout_compare(add_kernel_class(datasets.load("h200/ncu_precision_w1"))),
        fusion=roofline.fusion_bound(trace),
        cost=roofline.launch_cost(sweep, trace, 1),
        cost8=roofline.launch_cost(sweep, trace, 8),
        high=roofline.HIGH_PCT,
        fused=roofline.fusion_measured(
            pd.concat(
                [_kernels("eager", 1, [1.0] * 240), _kernels("compile", 1, [1.0] * 140)],
                ignore_index=True,
            )
        ),
        fused_label="synthetic",
    )
    assert not re.search(r"\bnan\b", text, re.I)
    assert "fusing YOLOv8's C2f removes over 90 % of kernel launches\": " in text
    assert "compile (synthetic) launches 140 kernels per forward against eager's 240 (-42%)" in text


# ---------------------------------------------------------------- YOLOv8: occupancy vs throughput


@pytest.fixture(scope="module")
def ncu_tp():
    return datasets.load("h200/ncu_throughput_w1")


def test_yolo_occupancy_split_adds_up(ncu_tp):
    split = roofline.yolo_occupancy_vs_throughput(ncu_tp)
    assert sorted(split.width.unique()) == [0.5, 1.0, 2.0]
    assert set(split.occupancy) == {"< 60 %", ">= 60 %"} and len(split) == 6
    by = split.groupby("config")
    assert (by.kernels.sum() == 236).all()
    assert by.time_share.sum().round(9).eq(1.0).all()
    total = ncu_tp.groupby("config").duration_us.sum()
    assert (by.time_us.sum() - total).abs().max() < 1e-6
    lo = split[split.occupancy == "< 60 %"]
    assert (lo.occupancy_max_pct < 60).all()
    assert (split[split.occupancy == ">= 60 %"].occupancy_min_pct >= 60).all()
    # every side's time-weighted SM % is a mean of its kernels': inside their range
    k = roofline.yolo_kernels(ncu_tp)
    for r in split.itertuples():
        g = k[(k.config == r.config) & (k.occupancy == r.occupancy)]
        assert g.sm_throughput_pct.min() <= r.sm_throughput_tw_pct <= g.sm_throughput_pct.max()
    # a different cut moves kernels between the sides, not out of the table
    s30 = roofline.yolo_occupancy_vs_throughput(ncu_tp, cut=30.0)
    assert (s30.groupby("config").kernels.sum() == 236).all()
    assert set(s30.occupancy) == {"< 30 %", ">= 30 %"}


def test_yolo_occupancy_keeps_an_empty_side(ncu_tp):
    split = roofline.yolo_occupancy_vs_throughput(ncu_tp, cut=5.0)  # no kernel under 5 %
    lo = split[split.occupancy == "< 5 %"]
    assert len(lo) == 3 and (lo.kernels == 0).all() and (lo.time_share == 0).all()
    assert (split.groupby("config").time_share.sum().round(9) == 1.0).all()


def test_yolo_stage_throughput(ncu_tp):
    st = roofline.yolo_stage_throughput(ncu_tp)
    assert list(st[st.width == 1.0].stage) == ["backbone", "neck", "head"]
    assert st.groupby("config").time_share.sum().round(9).eq(1.0).all()
    assert (st.groupby("config").kernels.sum() == 236).all()
    assert st.low_occupancy_time_share.between(0, 1).all()
    split = roofline.yolo_occupancy_vs_throughput(ncu_tp).set_index(["width", "occupancy"])
    st["low_us"] = st.low_occupancy_time_share * st.time_us
    low = st.groupby("width").low_us.sum()
    for w, v in low.items():
        assert abs(v - split.loc[(w, "< 60 %"), "time_us"]) < 1e-6


def test_yolo_occupancy_findings(ncu_tp):
    split = roofline.yolo_occupancy_vs_throughput(ncu_tp)
    text = roofline_plots.yolo_occupancy_findings(split, roofline.yolo_stage_throughput(ncu_tp))
    assert not re.search(r"\bnan\b", text, re.I)
    for w in ("0.5", "1", "2"):
        assert re.search(rf"\bwidth {re.escape(w)}\b", text), w
    lo = split[split.occupancy == "< 60 %"].sort_values("width")
    shares = " / ".join(f"{v:.0%}" for v in lo.time_share)
    assert f"take\n  {shares} of the forward's kernel time" in text
    assert "tensor_core_conv" in text
    assert roofline_plots.plot_yolo_occupancy(roofline.yolo_kernels(ncu_tp)).data


def test_yolo_occupancy_on_absent_or_empty_input(ncu_tp):
    for bad in (None, ncu_tp.iloc[:0]):
        with pytest.raises(UserError, match="no kernels"):
            roofline.yolo_occupancy_vs_throughput(bad)
        with pytest.raises(UserError, match="no kernels"):
            roofline.yolo_stage_throughput(bad)

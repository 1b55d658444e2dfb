"""yolo_sm.topics.roofline.analyse over the model table and the shipped data: counted bytes and
FLOPs, rooflines, layout and launch views, the facts and the rules that judge them (CPU only)."""

import pandas as pd
import pytest

from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.contract import hardware
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.report import plots, rules
from yolo_sm.report.rules import topic_rules
from yolo_sm.topics.launches import analyse as launches
from yolo_sm.topics.roofline import analyse as roofline
from yolo_sm.topics.roofline import report as roofline_plots


@pytest.fixture(scope="module")
def root():
    return open_root("h200")


@pytest.fixture(scope="module")
def layers(root):
    return root.load("model_layers")


@pytest.fixture(scope="module")
def ncu_yolo(root):
    return root.load("ncu_width_b8")


@pytest.fixture(scope="module")
def peaks(root):
    return hardware.roofline_ceilings(root)


@pytest.fixture(scope="module")
def roof(ncu_yolo, layers, peaks):
    return roofline.roofline_table(ncu_yolo, layers, *peaks, widths=[0.25])


@pytest.fixture(scope="module")
def resnet(root):
    return add_kernel_class(root.load("ncu_resnet101"))


@pytest.fixture(scope="module")
def stages(resnet, layers):
    return roofline.resnet_stages(resnet, layers)


@pytest.fixture(scope="module")
def trace(root):
    return root.load("trace_width_b8")


@pytest.fixture(scope="module")
def facts(root):
    return roofline.facts(root)


def _subset_root(tmp_path, src, names):
    """A root in ``tmp_path`` holding only ``names`` of ``src`` (files linked, manifest cut)."""
    import json

    entries = src.entries()
    for n in names:
        (tmp_path / entries[n]["file"]).symlink_to(src.path / entries[n]["file"])
    mf = {"datasets": {n: entries[n] for n in names}}
    (tmp_path / "manifest.json").write_text(json.dumps(mf))
    return open_root(tmp_path)


# ---------------------------------------------------------------- ceilings from the root


def test_ceilings_come_from_the_root(root, tmp_path):
    c = hardware.peak_rows(root.load("ceilings")).set_index("ceiling").value
    pk, src = hardware.peak_fp16_tflops(root)
    assert pk == c["matmul_fp16"] and "h200/ceilings" in src
    # the source names the kernel that set the ceiling (the table's kernel column)
    rows = hardware.peak_rows(root.load("ceilings")).set_index("ceiling")
    assert rows.kernel["matmul_int8"] in hardware.ceiling(root, "matmul_int8")[1]
    assert rows.kernel["matmul_fp16"] in src
    assert hardware.peak_copy_gbps(root)[0] == c["copy_d2d"]
    assert hardware.roofline_ceilings(root) == (c["matmul_fp16"], c["copy_d2d"])
    assert hardware.ceiling(root, "no_such_ceiling") is None
    bare = _subset_root(tmp_path, root, ["model_layers"])
    assert hardware.peak_fp16_tflops(bare) is None and hardware.roofline_ceilings(bare) is None


# ---------------------------------------------------------------- counted traffic


def test_model_rows_pick_one_model(layers):
    w1 = roofline.model_rows(layers, "yolov8", 1.0)
    assert len(w1) == 23 and list(w1["index"]) == list(range(23))
    assert (w1.max_channels == 2048).all()  # the uncapped model unless asked
    capped = roofline.model_rows(layers, "yolov8", 1.25, max_channels=512)
    assert capped.capped.any() and (capped.max_channels == 512).all()
    assert capped.flops.sum() < roofline.model_rows(layers, "yolov8", 1.25).flops.sum()
    assert len(roofline.model_rows(layers, "resnet101")) == 6
    with pytest.raises(UserError, match="no rows of yolov8 at width 3"):
        roofline.model_rows(layers, "yolov8", 3.0)


def test_traffic_scales_bytes_with_batch_and_element_size(layers):
    one = roofline.traffic(layers, "yolov8", 0.25, batch=1)
    t = roofline.traffic(layers, "yolov8", 0.25, batch=4)
    assert t.flops_batch.sum() == 4 * one.flops.sum()
    by = t.set_index("layer")
    # a chain: model.1's input is model.0's output; the first conv reads the 3-channel image
    assert by.loc["model.1", "in_bytes"] == by.loc["model.0", "out_bytes"]
    assert by.loc["model.0", "in_bytes"] == 4 * 3 * 640 * 640 * 2
    # Concat reads its inputs and writes the same number of elements, no FLOPs, no weights
    cat = by.loc["model.11"]
    assert cat.flops == 0 and cat.in_bytes == cat.out_bytes and cat.conv_bytes == 0
    assert (t.min_bytes == t.weight_bytes + t.in_bytes + t.out_bytes).all()
    # weights are read once per forward: not scaled by the batch
    assert (t.weight_bytes == one.weight_bytes).all()
    assert (t.out_bytes == 4 * one.out_bytes).all()
    # fp32: every byte twice
    f32 = roofline.traffic(layers, "yolov8", 0.25, batch=4, bytes_per_element=4)
    assert (f32.min_bytes == 2 * t.min_bytes).all() and (f32.conv_bytes == 2 * t.conv_bytes).all()
    # a C2f's convs move at least what the layer does at its boundary (internal tensors too)
    c2f = t[t.module_type == "C2f"]
    assert (c2f.conv_bytes >= c2f.min_bytes).all()
    assert (c2f.intensity >= c2f.conv_intensity).all()


def test_activation_table(layers):
    act = roofline.activation_table(layers, [0.25])
    assert len(act) == 23
    # model.0 (stride 2, 16 channels at width 0.25) outputs 16 x 320 x 320 fp16 per image
    row = act.set_index("layer").loc["model.0"]
    assert row.activation_mb * 1e6 == 16 * 320 * 320 * 2


# ---------------------------------------------------------------- absolute roofline


def test_roofline_table_joins_time_and_stays_under_the_roof(ncu_yolo, roof):
    assert len(roof) == 23 and set(roof.width) == {0.25}
    cfg = "yolov8_w0.25_fp16_nhwc_b8"
    times = ncu_yolo[ncu_yolo.config == cfg].groupby("layer").duration_us
    r = roof.set_index("layer")
    assert r.time_us.to_dict() == pytest.approx(times.sum().to_dict())
    assert r.kernels.sum() == len(ncu_yolo[ncu_yolo.config == cfg])
    assert (roof.batch == 8).all()
    flop = roof[roof.flops > 0]
    assert (flop.achieved_tflops > 0).all() and (flop.pct_of_roof <= 100).all()
    assert (flop.achieved_tflops <= roof.attrs["peak_tflops"]).all()
    assert roof.attrs["ridge"] == pytest.approx(
        roof.attrs["peak_tflops"] * 1e3 / roof.attrs["peak_gbps"]
    )
    assert (roof[roof.flops == 0].side == "memory").all()
    back = roof.achieved_gbps * roof.time_us * 1e3  # achieved GB/s x time = counted bytes
    assert back.to_numpy() == pytest.approx(roof.min_bytes.to_numpy().astype(float))


def test_roofline_ceilings_are_parameters(ncu_yolo, layers, roof):
    other = roofline.roofline_table(ncu_yolo, layers, 100.0, 1000.0, widths=[0.25])
    assert other.attrs["ridge"] == pytest.approx(100.0)
    assert other.achieved_tflops.to_numpy() == pytest.approx(roof.achieved_tflops.to_numpy())
    assert (other.pct_of_roof.dropna() >= roof.pct_of_roof.dropna()).all()
    with pytest.raises(UserError):
        roofline.roofline_table(ncu_yolo, layers, 100.0, 1000.0, widths=[3.0])


def test_root_roofline_needs_the_ceilings(root, tmp_path):
    t = roofline.root_roofline(root, [1.0])
    assert set(t.width) == {1.0} and "h200/ceilings" in t.attrs["ceilings_from"]
    bare = _subset_root(tmp_path, root, ["model_layers", "ncu_width_b8"])
    with pytest.raises(UserError, match="ceilings"):
        roofline.root_roofline(bare)


def test_side_summary(roof):
    s = roofline.side_summary(roof)
    assert len(s) == 1 and s.layers.iloc[0] == 23
    assert 0 <= s.memory_side_time_share.iloc[0] <= 1
    assert 0 < s.pct_of_roof_tw.iloc[0] < 100


# ---------------------------------------------------------------- normalised roofline


def test_bound_of():
    assert roofline.bound_of(50, 80) == "memory-bound"
    assert roofline.bound_of(80, 50) == "compute-bound"
    assert roofline.bound_of(40, 30).startswith("neither")
    assert roofline.bound_of(70, 70) == "memory-bound"  # tie: DRAM wins
    assert list(roofline.bound_of(pd.Series([90, 10]), pd.Series([10, 90]))) == [
        "compute-bound",
        "memory-bound",
    ]


def test_resnet_stages(resnet, stages, layers):
    assert list(stages.layer) == ["stem", "layer1", "layer2", "layer3", "layer4", "head"]
    assert stages.kernels.sum() == (resnet.layer != "").sum()
    assert stages.flops_batch.sum() == 8 * roofline.model_rows(layers, "resnet101").flops.sum()
    assert stages.time_share.sum() == pytest.approx(1.0)
    for c in ("sm_throughput_tw_pct", "dram_throughput_tw_pct", "tensor_pipe_tw_pct"):
        assert stages[c].between(0, 100).all()
    # layer3 holds most of ResNet-101's FLOPs (23 of its 33 bottlenecks)
    assert stages.set_index("layer").flops_batch.idxmax() == "layer3"


def test_throughput_view_wide_stack(root):
    wide = roofline.with_config(root.load("ncu_wide_stack"))
    v = roofline.throughput_view(wide, ["width", "stage"])
    assert len(v) == wide.width.nunique() * wide.stage.nunique()
    assert v.time_us.sum() == pytest.approx(wide.duration_us.sum())
    assert set(v.bound) <= set(roofline.BOUNDS)


# ---------------------------------------------------------------- layout and launches


def test_layout_compare(root):
    lay = roofline.layout_compare(add_kernel_class(root.load("ncu_precision_w1")), "fp16")
    by = lay.set_index("layout")
    assert set(by.index) == {"nchw", "nhwc"}
    assert by.loc["nhwc", "time_vs_nhwc"] == 1.0
    assert by.loc["nhwc", "transform_kernels"] == 0
    assert by.loc["nchw", "transform_kernels"] > 0
    assert 0 < by.loc["nchw", "transform_time_share"] < 1


def test_launch_views(trace):
    per = launches.launches_per_type(trace, 0)
    it0 = trace[trace.iteration == 0]
    assert per.kernels.sum() == len(it0)
    assert per.groupby("config").launch_share.sum().to_numpy() == pytest.approx(1.0)
    f = launches.fusion_bound(trace, 0, "C2f")
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
    f = launches.fusion_measured(k).set_index("engine")
    assert f.loc["eager", "launches"] == 8 and f.loc["compile", "launches"] == 3  # per forward
    assert f.loc["eager", "kernel_ms"] == pytest.approx(0.08)
    assert f.loc["compile", "kernel_ms"] == pytest.approx(0.05)
    assert f.loc["compile", "removed_launch_share"] == pytest.approx(5 / 8)
    assert f.loc["compile", "removed_time_share"] == pytest.approx(3 / 8)
    assert f.loc["eager", "removed_launch_share"] == 0
    with pytest.raises(UserError, match="no kernels of tensorrt"):
        launches.fusion_measured(k, fused="tensorrt")


def test_launch_cost(root, trace):
    sweep = root.load("sweep_fp16_nhwc")
    c1 = launches.launch_cost(sweep, trace, 1)
    assert "gpu_kernel_ms" not in c1  # the trace is batch 8: no kernel time for batch 1
    # the sweep's own busy time gives the idle share at any batch, from one process
    assert (c1.idle_from == "sweep GPU busy time (same run)").all()
    e1 = sweep[(sweep.batch == 1) & (sweep.backend == "eager")].set_index("width")
    expect = 1 - e1.gpu_busy_ms / e1.median_ms
    assert c1.set_index("width").gpu_idle_share_eager.to_dict() == pytest.approx(
        expect.reindex(c1.width).to_dict()
    )
    old = launches.launch_cost(sweep.drop(columns="gpu_busy_ms"), trace, 8)
    assert (old.idle_from == "trace kernel time").all()
    assert old.gpu_idle_share_eager.to_numpy() == pytest.approx(
        (1 - old.gpu_kernel_ms / old.eager).to_numpy()
    )
    counts = trace[trace.iteration == 0].groupby("config").size()
    assert set(c1.kernels_per_forward) <= set(counts)
    c8 = launches.launch_cost(sweep, trace, 8)
    assert (c8.gpu_kernel_ms > 0).all() and (c8.gpu_idle_share_eager < 1).all()


# ---------------------------------------------------------------- YOLOv8: occupancy vs throughput


@pytest.fixture(scope="module")
def ncu_tp(root):
    return root.load("ncu_throughput_w1")


def test_yolo_occupancy_split_adds_up(ncu_tp):
    k = roofline.yolo_kernels(ncu_tp)
    split = roofline.yolo_occupancy_vs_throughput(k)
    assert sorted(split.width.unique()) == [0.5, 1.0, 2.0]
    assert set(split.occupancy) == {"< 60 %", ">= 60 %"} and len(split) == 6
    by = split.groupby("width")
    assert (by.kernels.sum() == 236).all()
    assert by.time_share.sum().round(9).eq(1.0).all()
    for r in split.itertuples():  # a side's time-weighted SM % lies inside its kernels' range
        g = k[(k.width == r.width) & (k.occupancy == r.occupancy)]
        assert g.sm_throughput_pct.min() <= r.sm_throughput_tw_pct <= g.sm_throughput_pct.max()
    s30 = roofline.yolo_occupancy_vs_throughput(roofline.yolo_kernels(ncu_tp, cut=30.0))
    assert (s30.groupby("width").kernels.sum() == 236).all()
    assert set(s30.occupancy) == {"< 30 %", ">= 30 %"}


def test_yolo_occupancy_on_absent_or_empty_input(ncu_tp):
    for bad in (None, ncu_tp.iloc[:0]):
        with pytest.raises(UserError, match="no kernels"):
            roofline.yolo_kernels(bad)


# ---------------------------------------------------------------- facts


def _v(facts, key, scope=""):
    key = key if key.startswith(roofline.PREFIX) else roofline.PREFIX + key
    hit = facts[(facts.key == key) & (facts.scope == scope)]
    assert len(hit) == 1, (key, scope)
    return float(hit.value.iloc[0])


def test_facts_recompute_from_the_tables(facts, stages, ncu_tp, trace, root):
    # ResNet: the least DRAM-busy early stage and the least SM-busy deep stage (claim 14)
    by = stages.set_index("layer")
    assert _v(facts, "resnet_early_min_dram_pct") == pytest.approx(
        by.loc[list(roofline.EARLY)].dram_throughput_tw_pct.min()
    )
    assert _v(facts, "resnet_deep_min_sm_pct") == pytest.approx(
        by.loc[list(roofline.DEEP)].sm_throughput_tw_pct.min()
    )
    # the occupancy split at width 1.0 (claim 6)
    split = roofline.yolo_occupancy_vs_throughput(roofline.yolo_kernels(ncu_tp))
    lo = split[(split.width == 1.0) & (split.occupancy == "< 60 %")].iloc[0]
    key = "tensor_pipe_pct_below_60_occupancy"
    assert _v(facts, key, "width=1.0") == pytest.approx(lo.tensor_pipe_tw_pct)
    # fusion: the share is the largest over widths (claim 11)
    f = launches.fusion_bound(trace)
    assert _v(facts, "c2f_fusion_removed_launch_share") == pytest.approx(f.removed_share.max())
    # absolute roofline at width 1.0 against side_summary
    s = roofline.side_summary(roofline.root_roofline(root, [1.0])).iloc[0]
    assert _v(facts, "yolo_pct_of_roof_tw", "width=1.0") == pytest.approx(s.pct_of_roof_tw)
    # only what a rule reads is computed: no other width
    assert set(facts.scope) <= {"", "width=1.0", "precision=fp16", "width=0.25,batch=8"}
    assert set(facts.key) <= roofline.FACT_KEYS


def test_facts_of_a_root_with_only_the_model_table(root, tmp_path):
    # how memory grows with width is the model's structure (the same on every machine): a
    # table, no rule
    assert roofline.facts(_subset_root(tmp_path, root, ["model_layers"])).empty


def test_facts_of_an_empty_root(root, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "manifest.json").write_text('{"datasets": {}}')
    assert roofline.facts(open_root(empty)).empty


# ---------------------------------------------------------------- rules


@pytest.mark.parametrize("rule", topic_rules("roofline"), ids=lambda r: r.id)
def test_each_rule_flips_with_its_fact(rule):
    """Moving the rule's fact across its threshold flips the verdict (holds / does not hold)."""
    step = max(abs(rule.threshold) * 0.5, 0.1)
    good = rule.threshold + step if rule.op in (">", ">=") else rule.threshold - step
    loose = rule.partly if rule.partly is not None else rule.threshold
    bad = loose - step if rule.op in (">", ">=") else loose + step

    def verdict(x):
        f = pd.DataFrame(
            [{"key": rule.fact, "value": x, "unit": rule.unit, "scope": rule.scope,
              "datasets": (), "note": ""}]
        )  # fmt: skip
        return rules.evaluate([rule], f).verdict.iloc[0]

    assert verdict(good) == rules.HOLDS
    assert verdict(bad) == rules.FAILS
    if rule.partly is not None:
        assert verdict((rule.threshold + rule.partly) / 2) == rules.PARTLY
    assert verdict(float("nan")) == rules.NOT_TESTED


def test_rules_on_the_shipped_root_are_decided(root, facts):
    v = rules.evaluate(topic_rules("roofline"), facts, root.name)
    assert (v.verdict != rules.NOT_TESTED).all()
    assert {r.group for r in topic_rules("roofline")} == {"06_roofline"}


# ---------------------------------------------------------------- figures and notes


def test_plots_return_figures(roof, stages, resnet, trace, layers):
    fig = roofline_plots.plot_roofline(roof)
    names = [t.name or "" for t in fig.data]
    assert any(n.startswith("roof") for n in names) and any("ridge" in n for n in names)
    assert roofline_plots.plot_layer_heatmap(roof).data[0].type == "heatmap"
    assert len(roofline_plots.plot_stage_bars(stages).data) == 4
    assert roofline_plots.plot_normalised_roofline(resnet).data


def test_plot_yolo_occupancy(ncu_tp):
    fig = roofline_plots.plot_yolo_occupancy(roofline.yolo_kernels(ncu_tp))
    assert {t.name for t in fig.data} == {"< 60 %", ">= 60 %"}


def test_available_says_in_one_line_what_a_root_lacks(root, tmp_path, capsys):
    bare = _subset_root(tmp_path, root, ["model_layers"])
    assert roofline_plots.available(bare, "model_layers") and capsys.readouterr().out == ""
    assert not roofline_plots.available(bare, "ncu_resnet101", "model_layers")
    out = capsys.readouterr().out.strip()
    assert "ncu_resnet101" in out and "model_layers" not in out and "\n" not in out
    assert root.device_name() in plots.about(root)
    assert "H200" not in plots.about(bare)


def test_the_machine_line_reads_the_gpu_datasets_versions(root):
    line = plots.about(root)
    gpu_torch = root.info("ncu_width_b8")["provenance"]["torch"]
    cpu_torch = root.info("model_layers")["provenance"]["torch"]
    assert gpu_torch in line
    if cpu_torch != gpu_torch:  # the model table was counted on another host
        assert cpu_torch not in line

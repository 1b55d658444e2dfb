"""Every figure the notebooks draw, built from the shipped H200 root by the same calls, speaks
one visual vocabulary: axis titles in words (no bare column name, none missing) and the colours
of ``yolo_sm.report.colors`` for every category key. The check itself is tested to fail on a
figure that breaks it. (The notebook tests run the same check on every figure of every
executed notebook.)"""

import plotly.graph_objects as go
import pytest

from tests import figure_checks
from yolo_sm.analyse import kernels
from yolo_sm.contract.datasets import open_root
from yolo_sm.report import colors, plots, style, widgets
from yolo_sm.topics.batch import agreement_report as agreement_plots
from yolo_sm.topics.batch import report as batch_sections
from yolo_sm.topics.deploy import report as fast_plots
from yolo_sm.topics.heatmaps import analyse as heatmaps
from yolo_sm.topics.heatmaps import report as heatmaps_plots
from yolo_sm.topics.precision import analyse as precision
from yolo_sm.topics.primer import analyse as primer
from yolo_sm.topics.primer import report as primer_plots
from yolo_sm.topics.roofline import analyse as roofline
from yolo_sm.topics.roofline import report as roofline_plots
from yolo_sm.topics.timeline import report as timeline_sections
from yolo_sm.topics.width import analyse as scaling
from yolo_sm.topics.width import report as scaling_plots


@pytest.fixture(scope="module")
def root():
    return open_root("h200")


def _figures(items):
    return [i for i in (items if isinstance(items, list) else [items]) if isinstance(i, go.Figure)]


def _primer(root):
    k = primer.kernels_of(root)
    launch = primer.flagship_launch(root)
    flag = primer.flagship_kernels(k, launch)
    sms = primer.sm_count(root)
    ncu = root.load("ncu_width_b8")
    fwd = primer.forward(ncu)
    return [
        primer_plots.plot_limits(primer.limit_examples(k)),
        plots.plot_occupancy_curves(widgets.launch_curves(launch)),
        primer_plots.plot_waves(
            primer.utilisation_curve(sms), flag, primer.tail_example(flag, sms)
        ),
        primer_plots.plot_pipe_vs_occupancy(primer.pipe_vs_occupancy(root.load("ncu_wide_stack"))),
        primer_plots.plot_contrast(primer.simt_contrast(root.load("ncu_precision_w1"))),
        plots.plot_achieved_vs_theoretical(fwd.assign(nvtx_range=fwd.config)),
        plots.plot_class_shares(kernels.class_shares(ncu, by=["config"]), y="config"),
    ]


def _width_and_precision(root):
    sweep = root.load("sweep_fp16_nhwc")
    peak = scaling.peak_tflops(root)
    table = scaling.throughput_table(sweep, peak)
    ncu = root.load("ncu_width_b8")
    prec = root.load("ncu_precision_w1")
    core = precision.load_present(root, ["sweep_precision_core"])
    checked = precision.load_present(root, ["sweep_precision_core", "sweep_fp16_nhwc"])
    return [
        plots.plot_width_flops(scaling.flops_by_width(sweep)),
        scaling_plots.plot_img_per_s(table, root.device_name()),
        scaling_plots.plot_peak_share(table),
        scaling_plots.plot_width_occupancy(scaling.width_occupancy(ncu)),
        scaling_plots.plot_class_occupancy(scaling.class_occupancy(ncu)),
        scaling_plots.plot_wide_stack(scaling.wide_stack_table(root.load("ncu_wide_stack"))),
        scaling_plots.plot_presets(scaling.presets_table(root.load("sweep_presets"), peak)),
        scaling_plots.plot_compile_by_width(root.load("bench_fast_engines")),
        scaling_plots.plot_precision_speedup(precision.precision_speedup(core)),
        scaling_plots.plot_precision_speedup(
            precision.precision_speedup(root.load("sweep_bf16_nhwc"), baseline="fp16"),
            baseline="fp16",
        ),
        scaling_plots.plot_precision_forward(precision.precision_forward(prec)),
        scaling_plots.plot_precision_class_shares(prec),
        scaling_plots.plot_rel_err(checked),
    ]


def _batch_and_timeline(root):
    s, s1280, pool = "sweep_fp16_nhwc", "sweep_1280", "sweep_bf16_nhwc"
    out = []
    for items in (
        batch_sections.throughput(root, s, s1280),
        batch_sections.saturation(root, s, s1280),
        batch_sections.graph(root, s),
        batch_sections.coverage(root, "ncu_batch_w1"),
        batch_sections.gpm_by(root, "gpm_batch_w1", "batch"),
        batch_sections.memory(root, s, s1280),
        batch_sections.graph_memory(root, s, pool),
        timeline_sections.gpm_timeline(root, "gpm_batch_w1", "batch"),
        batch_sections.gpm_by(root, "gpm_width_b16", "width", table=False),
        timeline_sections.gaps(root, "trace_batch_w1"),
    ):
        out += _figures(items)
    return out


def _heatmaps(root):
    ncu = root.load("ncu_width_b8")
    widths = heatmaps.layer_table(ncu)
    both = ("achieved_occupancy_tw_pct", "theoretical_occupancy_tw_pct")
    widest = widths.loc[widths.width.idxmax(), "config"]
    cell = heatmaps.kernels_of(ncu, widest, heatmaps.slowest_layer(widths, widest))
    est = heatmaps.estimate_vs_measured(root.load("profile_layers"))
    return [
        heatmaps_plots.plot_layer_heatmap(widths, both, x="width"),
        heatmaps_plots.plot_layer_heatmap(widths, "time_share", x="width"),
        heatmaps_plots.plot_limiter_heatmap(widths, x="width"),
        heatmaps_plots.plot_limiter_shares(heatmaps.limiter_shares(ncu), x="width"),
        heatmaps_plots.plot_kernels(cell),
        heatmaps_plots.plot_estimate_vs_measured(est, tolerance=heatmaps.KINETO_TOLERANCE),
    ]


def _roofline(root):
    resnet = kernels.add_kernel_class(root.load("ncu_resnet101"))
    stages = roofline.resnet_stages(resnet, root.load("model_layers"))
    wide = roofline.with_config(kernels.add_kernel_class(root.load("ncu_wide_stack")))
    roof = roofline.root_roofline(root, [0.25, 0.5, 1.0, 1.5, 2.0])
    return [
        roofline_plots.plot_stage_bars(stages),
        roofline_plots.plot_stage_kernels(resnet),
        roofline_plots.plot_width_kernels(wide),
        roofline_plots.plot_roofline(roof),
        roofline_plots.plot_layer_heatmap(roof, "pct_of_roof"),
        roofline_plots.plot_layer_heatmap(roof, "achieved_gbps", colorscale="Blues"),
        roofline_plots.plot_yolo_occupancy(
            roofline.yolo_kernels(root.load("ncu_throughput_w1"), 60.0)
        ),
    ]


def _claims_and_fast(root):
    return [
        fast_plots.speedup_figure(root),
        fast_plots.pipeline_figure(root),
        fast_plots.compile_figure(root),
    ]


GROUPS = (
    _primer,
    _width_and_precision,
    _batch_and_timeline,
    _heatmaps,
    _roofline,
    _claims_and_fast,
)


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g.__name__.strip("_"))
def test_every_figure_speaks_the_vocabulary(root, group):
    figs = group(root)
    assert figs and all(isinstance(f, go.Figure) for f in figs)
    bad = [(f.layout.title.text, p) for f in figs if (p := figure_checks.problems(f))]
    assert not bad, bad


def test_the_check_catches_a_bare_column_name_and_a_missing_title():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="a"))
    fig.update_layout(xaxis_title="img_per_s")
    problems = figure_checks.problems(fig)
    assert any("column name" in p for p in problems)
    assert any("no y axis" in p for p in problems)
    fig.update_layout(xaxis_title="images per second", yaxis_title="latency (ms)")
    assert figure_checks.problems(fig) == []


def test_the_check_catches_a_category_in_another_colour():
    fig = go.Figure(go.Bar(x=["a"], y=[1], name="fp16", marker_color="#000000"))
    fig.update_layout(xaxis_title="forward", yaxis_title="GPU time (ms)")
    assert any("fp16" in p for p in figure_checks.problems(fig))
    style.recolor(fig)
    assert fig.data[0].marker.color == colors.COLORS["fp16"] and figure_checks.problems(fig) == []


def test_finish_words_titles_and_colours_engines_and_widths():
    fig = go.Figure(
        [
            go.Scatter(x=[1, 2], y=[1, 300], name="cudagraph/fp8/nhwc", mode="lines"),
            go.Scatter(x=[1, 2], y=[2, 30], name="compile:reduce-overhead/fp16/nhwc"),
        ]
    )
    fig.update_layout(xaxis_title="batch", yaxis_title="img_per_s", yaxis_type="log")
    style.finish(fig)
    assert fig.layout.yaxis.title.text == "images per second"
    assert fig.data[0].line.color == colors.COLORS["fp8"]
    assert fig.data[1].line.color == colors.COLORS["compile:reduce-overhead"]
    ticks = list(fig.layout.yaxis.tickvals)
    assert ticks == [1, 2, 5, 10, 20, 50, 100, 200]  # 1-2-5 inside the data, no minor digits
    assert list(fig.layout.yaxis.ticktext)[-2:] == ["100", "200"]
    w = go.Figure([go.Scatter(x=[1], y=[1], name=n) for n in ("0.25", "2")])
    w.update_layout(legend_title_text="width")
    style.recolor(w)
    # the width scale: the same width gets the same colour in every figure
    assert w.data[0].line.color == colors.width_color(0.25) != colors.width_color(2.0)
    assert colors.batch_color(1) != colors.batch_color(64)


def test_agreement_sections_build(root):
    for section in (
        agreement_plots.graph_speedup,
        agreement_plots.eager_memory,
    ):
        items = section(root)
        assert isinstance(items, list) and len(items) >= 2

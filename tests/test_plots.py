"""Plot functions return figures built from the table they are given."""

import pytest

from yolo_sm.contract import datasets
from yolo_sm.report import colors, plots


def test_width_flops_plot_has_counted_and_law():
    import pandas as pd

    t = pd.DataFrame({"width": [0.5, 1.0, 2.0], "gflops_per_img": [27.0, 108.0, 430.0]})
    fig = plots.plot_width_flops(t)
    assert len(fig.data) == 2
    assert list(fig.data[1].y) == pytest.approx([27.0, 108.0, 432.0])


def test_occupancy_curves_and_explorer_tables():
    from yolo_sm.report import widgets

    curves = widgets.curves_for("9.0", 384, 168, 0)
    assert set(curves.vary) == {"threads_per_block", "registers_per_thread", "shared_mem_per_block"}
    regs = curves[curves.vary == "registers_per_thread"].sort_values("value")
    assert regs.occupancy_pct.is_monotonic_decreasing
    fig = plots.plot_occupancy_curves(curves)
    assert len(fig.data) == 3


def test_achieved_vs_theoretical_and_class_shares_from_real_capture():
    from yolo_sm.analyse import kernels

    ncu = kernels.add_kernel_class(datasets.load("h200/ncu_occupancy"))
    one = ncu[ncu.nvtx_range == "yolov8_w1.0_fp16_nhwc_b8"]
    fig = plots.plot_achieved_vs_theoretical(one)
    assert sum(len(t.x) for t in fig.data) == len(one)
    shares = kernels.class_shares(ncu, by=["nvtx_range"])
    fig = plots.plot_class_shares(shares)
    assert {t.name for t in fig.data} == set(shares.kernel_class)


def test_one_colour_mapping_covers_every_category():
    from yolo_sm.analyse import kernels
    from yolo_sm.contract.vocab import Backend, Layout, Precision
    from yolo_sm.topics.heatmaps import analyse as heatmaps
    from yolo_sm.topics.roofline import analyse as roofline

    families = {
        "backend": [b.value for b in Backend],
        "precision": [p.value for p in Precision],  # int8 and fp8 included
        "layout": [x.value for x in Layout],
        "kernel class": list(kernels.CLASSES),
        "limiter": list(heatmaps.LIMITERS),
        "bound": list(roofline.BOUNDS),
        "occupancy": ["theoretical", "achieved"],
    }
    for name, values in families.items():
        missing = [v for v in values if v not in colors.COLORS]
        assert not missing, f"{name}: no colour for {missing}"
        # within a family, every value has its own colour
        assert len({colors.COLORS[v] for v in values}) == len(values), name


def test_color_map_and_sequential_map():
    assert colors.color_map(["fp8", "nope"]) == {"fp8": colors.COLORS["fp8"]}
    assert colors.color_map(["nope"], default="#000000") == {"nope": "#000000"}
    m = colors.sequential_map([2.0, 0.5, 1.0])
    assert list(m) == [0.5, 1.0, 2.0] and len(set(m.values())) == 3


def test_absent_and_load_or_note(tmp_path, capsys):
    from yolo_sm.contract.datasets import open_root

    (tmp_path / "manifest.json").write_text('{"datasets": {}}')
    root = open_root(tmp_path)
    assert plots.load_or_note(root, "ncu_width_b8") is None
    line = capsys.readouterr().out.strip()
    assert line == plots.lacks(root, "ncu_width_b8") and "\n" not in line
    assert "Nsight Compute" in line and root.name in line
    assert f"({root.name}, {root.name})" not in line  # no machine: the root is named once
    assert "H200" not in plots.about(root)
    h200 = open_root("h200")
    assert plots.load_or_note(h200, "ncu_width_b8") is not None
    assert h200.device_name() in plots.about(h200)

"""FP16, INT8 and FP8 side by side (notebook 02): tables and figures, or what the root lacks."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import tables
from yolo_sm.report.colors import TEMPLATE, color_map
from yolo_sm.report.plots import lacks
from yolo_sm.report.sections import Note
from yolo_sm.report.style import finish
from yolo_sm.report.tables import code
from yolo_sm.topics.deploy.report import stacked_breakdown
from yolo_sm.topics.precision import eight_bit as p8
from yolo_sm.topics.precision import int8_kernels as ik

SPEED_COLUMNS = tuple(
    "batch width variant status img_per_s vs_fastest_fp16 fastest_fp16 vs_cudagraph_fp16 "
    "sm_clock_mhz rel_err quant_convs quant_fallbacks quant_handoffs".split()
)


def plot_speed(speed, *, title=None):
    """img/s over the fastest fp16 engine's, bars per engine by width, a panel per batch."""
    import plotly.express as px

    d = speed[speed.status == "ok"].assign(width=lambda x: x.width.map("{:g}".format))
    fig = px.bar(
        d, x="width", y="vs_fastest_fp16", color="variant", barmode="group", facet_col="batch",
        hover_data=["img_per_s", "fastest_fp16", "sm_clock_mhz", "rel_err"], template=TEMPLATE,
        color_discrete_map=color_map(d.variant.unique()),
        title=title or "Each engine's images per second over the fastest fp16 engine's",
    )  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dot")
    return finish(fig, "width multiplier", "speed over the fastest fp16 engine (x)")


def speed_section(root: DataRoot):
    """The bench_8bit engines per width (ratio grid, rows, figure), or one sentence."""
    if not root.has(p8.BENCH_8BIT):
        return lacks(root, p8.BENCH_8BIT)
    speed = p8.engine_speed(root.load(p8.BENCH_8BIT))
    if speed.empty:
        return lacks(root, p8.BENCH_8BIT)
    rows = tables.show(speed[list(SPEED_COLUMNS)])
    return tables.show(p8.speed_grid(speed)), rows, plot_speed(speed)


def breakdown_section(root: DataRoot, trace: str = p8.TRACE_INT8):
    """Where int8's GPU time goes against fp16's: per-width table, ms by part, stacked figure."""
    if not root.has(trace):
        return lacks(root, trace)
    kernels = root.load(trace)
    b = p8.int8_breakdown(kernels)
    traced = {"compile": "torch.compile"}
    backend = ", ".join(traced.get(x, x) for x in sorted(set(kernels["backend"].dropna())))
    fig = stacked_breakdown(
        b,
        "config",
        f"GPU ms per forward by part, {backend} fp16 vs int8, batch 64 "
        f"({root.device_name()}, Kineto)",
    )
    return tables.show(p8.trace_table(b)), tables.show(b), fig


def occupancy_section(root: DataRoot):
    """The 8-bit convolutions' occupancy against fp16's, then each trace per part."""
    held = {p: n for p, n in p8.TRACES_8BIT.items() if root.has(n)}
    if not held:
        return lacks(root, tuple(p8.TRACES_8BIT.values()))
    parts = {p: p8.part_occupancy(root.load(n)) for p, n in held.items()}
    conv = pd.concat([p8.conv_occupancy(t, p) for p, t in parts.items()], ignore_index=True)
    out = [tables.show(conv, caption="tensor-core convolutions, time-weighted")]
    for p, t in parts.items():
        out.append(tables.show(t, caption=f"{held[p]}: per part of the forward"))
    return tuple(out)


def error_section(root: DataRoot):
    """Head-output error and box agreement per width and engine."""
    if not root.has(p8.NUMERICS_8BIT):
        return lacks(root, p8.NUMERICS_8BIT)
    numerics = root.load(p8.NUMERICS) if root.has(p8.NUMERICS) else None
    return tables.show(p8.error_table(root.load(p8.NUMERICS_8BIT), numerics))


def plot_kernel_classes(classes, *, title=None):
    """Summed ms of each kernel per convolution class, one panel per width."""
    import plotly.express as px

    cols = [c for c in classes if c.endswith("_ms")]
    d = classes.melt(["width", "conv_class"], cols, var_name="kernel", value_name="ms").dropna()
    d["kernel"] = d.kernel.str.removesuffix("_ms")
    d = d.assign(width=d.width.map("width {:g}".format))
    fig = px.bar(
        d, x="conv_class", y="ms", color="kernel", barmode="group", facet_col="width",
        color_discrete_map=color_map(d.kernel.unique()), template=TEMPLATE,
        title=title or "Summed time of the model's convolutions per class and kernel",
    )  # fmt: skip
    fig.update_yaxes(title_text="GPU time, ms per batch", matches=None)
    return finish(fig, "convolution class")


def kernels_section(root: DataRoot):
    """Which int8 kernel is fastest: totals per kernel and class, rates, models, figure."""
    if not root.has(ik.INT8_KERNELS):
        return lacks(root, ik.INT8_KERNELS)
    df = root.load(ik.INT8_KERNELS)
    times = ik.conv_times(df)
    if times.empty:
        return lacks(root, ik.INT8_KERNELS)
    classes = ik.class_totals(times)
    batches = ", ".join(f"{b:g}" for b in sorted(df.batch.dropna().unique()))
    title = f"Convolution time per class and kernel, batch {batches} ({root.device_name()})"
    widths = ", ".join(f"{w:g}" for w in sorted(df.width.dropna().unique()))
    held = root.partial(ik.INT8_KERNELS)
    note = Note(
        f"{code(root.name + '/' + ik.INT8_KERNELS)} holds widths {widths}"
        + (f": it is partial ({held} of its plan step measured)." if held else ".")
    )
    return (
        note,
        tables.show(ik.kernel_totals(times)),
        tables.show(classes),
        tables.show(ik.kernel_rates(df, root)),
        tables.show(ik.model_speed(df)),
        plot_kernel_classes(classes, title=title),
    )

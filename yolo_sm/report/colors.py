"""One colour per category value, for every figure: :data:`COLORS` merges the families
(backends, precisions, layouts, kernel classes, limiters, bounds, occupancy kinds), whose names
never clash; limiters and occupancy get neutral colours (no good/bad reading)."""

from __future__ import annotations

BACKEND_COLORS = {
    "eager": "#636EFA", "cudagraph": "#EF553B", "compile": "#00CC96", "onnxruntime": "#AB63FA",
    "tensorrt": "#FFA15A", "compile:reduce-overhead": "#19D3F3", "copyfree": "#E377C2",
}  # fmt: skip
#: Frames-to-boxes rows of the fast-engines bench.
PIPELINE_COLORS = {"pipeline": "#FF6692", "ultralytics_predict": "#B6E880"}
PRECISION_COLORS = {
    "fp32": "#1F77B4", "tf32": "#17BECF", "fp16": "#D62728", "bf16": "#FF7F0E", "int8": "#2CA02C",
    "fp8": "#8C564B",
}  # fmt: skip
LAYOUT_COLORS = {"nchw": "#7F7F7F", "nhwc": "#BCBD22"}
KERNEL_CLASS_COLORS = {
    "tensor_core_conv": "#D62728", "simt_conv": "#FF9896", "tensor_core_gemm": "#9467BD",
    "simt_gemm": "#C5B0D5", "layout_transform": "#8C564B", "copy_concat": "#E377C2",
    "elementwise": "#1F77B4", "pooling_upsample": "#17BECF", "reduction": "#BCBD22",
    "triton": "#2CA02C", "other": "#7F7F7F",
}  # fmt: skip
#: Occupancy limiters: Okabe-Ito colours.
LIMITER_COLORS = {
    "warps": "#0072B2", "blocks": "#56B4E9", "registers": "#E69F00", "shared_mem": "#CC79A7",
    "grid": "#009E73",
}  # fmt: skip
#: Roofline bounds (yolo_sm.topics.roofline.analyse.BOUNDS).
BOUND_COLORS = {
    "memory-bound": "#1F77B4", "compute-bound": "#D62728",
    "neither (latency / under-used)": "#7F7F7F",
}  # fmt: skip
#: The calculator's occupancy against the counters' measurement.
OCCUPANCY_COLORS = {"theoretical": "#9E9E9E", "achieved": "#1F3A5F"}

#: The int8 convolution kernels (yolo_sm.topics.precision.int8_kernels; triton and fp16 as above).
INT8_KERNEL_COLORS = {
    "cudnn": "#6A3D9A", "intmm": "#FB9A99", "triton_prequant": "#B2DF8A", "best": "#333333",
}  # fmt: skip

#: A verdict's badge, (background, text) colour.
VERDICT_COLORS = {
    "holds": ("#0072B2", "#FFFFFF"), "partly": ("#56B4E9", "#063A57"),
    "does not hold": ("#D55E00", "#FFFFFF"), "not tested": ("#999999", "#FFFFFF"),
}  # fmt: skip

COLORS: dict[str, str] = {
    **BACKEND_COLORS, **PIPELINE_COLORS, **PRECISION_COLORS, **LAYOUT_COLORS,
    **KERNEL_CLASS_COLORS, **LIMITER_COLORS, **BOUND_COLORS, **OCCUPANCY_COLORS,
    **INT8_KERNEL_COLORS,
}  # fmt: skip
#: Colour of a value that no family names.
OTHER_COLOR = "#7F7F7F"

TEMPLATE = "plotly_white"
#: Sequential scale of occupancy heatmaps (0-100 %): neutral, light (low) to dark (high).
OCCUPANCY_SCALE = "Cividis"
#: Sequential scale of time shares.
SHARE_SCALE = "Blues"
WIDTH_SCALE = "Viridis"
BATCH_SCALE = "Plasma"
#: The widths and batches the scales span (outside: clipped), so a value keeps one colour.
WIDTH_RANGE = (0.25, 2.0)
BATCH_RANGE = (1, 4096)
#: How far along a scale its last colour sits (the scales' last, palest yellows vanish on white).
SCALE_END = 0.85


def _sample(scale: str, t: float) -> str:
    from plotly.colors import sample_colorscale

    return sample_colorscale(scale, [min(max(t, 0.0), 1.0) * SCALE_END])[0]


def width_color(width: float) -> str:
    """A width multiplier's colour (linear over :data:`WIDTH_RANGE`)."""
    lo, hi = WIDTH_RANGE
    return _sample(WIDTH_SCALE, (float(width) - lo) / (hi - lo))


def batch_color(batch: float) -> str:
    """A batch size's colour (log2 over :data:`BATCH_RANGE`)."""
    import math

    lo, hi = (math.log2(v) for v in BATCH_RANGE)
    return _sample(BATCH_SCALE, (math.log2(max(float(batch), 1.0)) - lo) / (hi - lo))


def category_color(name: str) -> str | None:
    """The colour of a category key, a kernel family or an engine variant (8-bit: its
    precision's, else its backend's); None for anything else."""
    if name in COLORS:
        return COLORS[name]
    head = str(name).split(" · ")[0]  # a kernel family: "tensor_core_conv · 384 thr · ..."
    if head in KERNEL_CLASS_COLORS:
        return KERNEL_CLASS_COLORS[head]
    parts = str(name).split("/")
    if len(parts) < 2:
        return None
    if parts[0] in PIPELINE_COLORS:
        return PIPELINE_COLORS[parts[0]]
    if any(p in ("fp8", "int8") for p in parts[1:]):
        return PRECISION_COLORS[next(p for p in parts[1:] if p in ("fp8", "int8"))]
    return BACKEND_COLORS.get(parts[0])


def color_map(values, default: str | None = None) -> dict:
    """``{value: colour}`` of ``values`` :data:`COLORS` names (others: ``default`` if set)."""
    return {v: COLORS.get(v, default) for v in values if v in COLORS or default is not None}


def sequential_map(values, scale: str = WIDTH_SCALE) -> dict:
    """``{value: colour}`` along ``scale``, the sorted values spread evenly."""
    from plotly.colors import sample_colorscale

    vals = sorted(set(values))
    if len(vals) == 1:
        return {vals[0]: sample_colorscale(scale, [0.0])[0]}
    points = [i / (len(vals) - 1) for i in range(len(vals))]
    return dict(zip(vals, sample_colorscale(scale, points), strict=True))


#: Caching-allocator configurations (PYTORCH_CUDA_ALLOC_CONF).
ALLOC_CONF_COLORS = {"default": "#4C72B0", "expandable_segments:True": "#DD8452"}

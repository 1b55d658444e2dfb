"""One colour mapping for every category a figure colours by, so every notebook matches.

:data:`COLORS` maps each category value to a colour: backends, precisions (int8 and fp8
included), memory layouts, kernel classes (:data:`yolo_sm.analyse.kernels.CLASSES`), occupancy
limiters (``warps``, ``blocks``, ``registers``, ``shared_mem``, ``grid``), roofline bounds, and
the two kinds of occupancy (``theoretical``, ``achieved``). The values of different families
never share a name, so one dictionary serves them all; :func:`color_map` picks the entries of the
values a figure shows. Limiters get no red-to-green meaning: a register-limited kernel is not a
"bad" kernel. Occupancy heatmaps use :data:`OCCUPANCY_SCALE`, a neutral sequential scale (low
occupancy is not "bad" on Hopper, where the fastest tensor-core kernels run one block per SM).
"""

from __future__ import annotations

BACKEND_COLORS = {
    "eager": "#636EFA",
    "cudagraph": "#EF553B",
    "compile": "#00CC96",
    "onnxruntime": "#AB63FA",
    "tensorrt": "#FFA15A",
}
PRECISION_COLORS = {
    "fp32": "#1F77B4",
    "tf32": "#17BECF",
    "fp16": "#D62728",
    "bf16": "#FF7F0E",
    "int8": "#2CA02C",
    "fp8": "#8C564B",
}
LAYOUT_COLORS = {
    "nchw": "#7F7F7F",
    "nhwc": "#BCBD22",
}
KERNEL_CLASS_COLORS = {
    "tensor_core_conv": "#D62728",
    "simt_conv": "#FF9896",
    "tensor_core_gemm": "#9467BD",
    "simt_gemm": "#C5B0D5",
    "layout_transform": "#8C564B",
    "copy_concat": "#E377C2",
    "elementwise": "#1F77B4",
    "pooling_upsample": "#17BECF",
    "reduction": "#BCBD22",
    "triton": "#2CA02C",
    "other": "#7F7F7F",
}
#: What caps a kernel's occupancy (yolo_sm.analyse.heatmaps.LIMITERS); Okabe-Ito colours,
#: readable with colour-blindness and free of a good/bad reading.
LIMITER_COLORS = {
    "warps": "#0072B2",
    "blocks": "#56B4E9",
    "registers": "#E69F00",
    "shared_mem": "#CC79A7",
    "grid": "#009E73",
}
#: Roofline bounds (yolo_sm.analyse.roofline.BOUNDS).
BOUND_COLORS = {
    "memory-bound": "#1F77B4",
    "compute-bound": "#D62728",
    "neither (latency / under-used)": "#7F7F7F",
}
#: The calculator's occupancy against the counters' measurement.
OCCUPANCY_COLORS = {
    "theoretical": "#9E9E9E",
    "achieved": "#1F3A5F",
}

FAMILIES = (
    BACKEND_COLORS,
    PRECISION_COLORS,
    LAYOUT_COLORS,
    KERNEL_CLASS_COLORS,
    LIMITER_COLORS,
    BOUND_COLORS,
    OCCUPANCY_COLORS,
)
COLORS: dict[str, str] = {k: v for family in FAMILIES for k, v in family.items()}
#: Colour of a value that no family names.
OTHER_COLOR = "#7F7F7F"

TEMPLATE = "plotly_white"
#: Sequential scale of occupancy heatmaps (0-100 %): neutral, light (low) to dark (high).
OCCUPANCY_SCALE = "Cividis"
#: Sequential scale of time shares.
SHARE_SCALE = "Blues"
#: Sequential scales of the two model knobs, sampled by :func:`sequential_map`.
WIDTH_SCALE = "Viridis"
BATCH_SCALE = "Plasma"


def color_map(values, default: str | None = None) -> dict:
    """``{value: colour}`` for the values of ``values`` that :data:`COLORS` names (the others get
    ``default``, or are left to plotly's own cycle when ``default`` is None)."""
    out = {}
    for v in values:
        if v in COLORS:
            out[v] = COLORS[v]
        elif default is not None:
            out[v] = default
    return out


def sequential_map(values, scale: str = WIDTH_SCALE) -> dict:
    """``{value: colour}`` along the sequential ``scale``, values in sorted order (a width or a
    batch: the narrowest or smallest gets the scale's first colour). Keys keep their type."""
    from plotly.colors import sample_colorscale

    vals = sorted(set(values))
    if len(vals) == 1:
        return {vals[0]: sample_colorscale(scale, [0.0])[0]}
    points = [i / (len(vals) - 1) for i in range(len(vals))]
    return dict(zip(vals, sample_colorscale(scale, points), strict=True))

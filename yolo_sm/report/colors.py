"""colors: split from report.plots."""

from __future__ import annotations

COLORS = {
    # backends
    "eager": "#636EFA",
    "cudagraph": "#EF553B",
    "compile": "#00CC96",
    "onnxruntime": "#AB63FA",
    "tensorrt": "#FFA15A",
    # precisions
    "fp32": "#1F77B4",
    "tf32": "#17BECF",
    "fp16": "#D62728",
    "bf16": "#FF7F0E",
    "int8": "#2CA02C",
    # layouts
    "nchw": "#7F7F7F",
    "nhwc": "#BCBD22",
}


TEMPLATE = "plotly_white"


def color_map(values) -> dict:
    return {v: COLORS[v] for v in values if v in COLORS}


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

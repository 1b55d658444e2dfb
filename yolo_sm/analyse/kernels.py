"""Kernel classes (:data:`CLASSES`) from demangled kernel names by ordered regular expressions,
with the ``op`` a name states (``add``, ``silu``, ``cat``) and matrix kernels' operand type."""

from __future__ import annotations

import re

CLASSES = tuple(
    "tensor_core_conv simt_conv tensor_core_gemm simt_gemm layout_transform copy_concat "
    "elementwise pooling_upsample reduction triton other".split()
)

_TENSOR_TYPES = r"(?:f16|bf16|tf32|i8|s8|e4m3|e5m2|h)"
RULES: tuple[tuple[str, re.Pattern], ...] = tuple((cls, re.compile(rx, re.I)) for cls, rx in (
    # layout transforms first: their names mention nchw/nhwc like conv kernels do
    ("layout_transform", r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|transpose_?kernel|"
     r"permute|cudnn::.*(?:transform|reorder)|AddPaddingKernel|RemovePaddingKernel"),
    ("simt_conv", r"xmma_fprop\w*_f32f32_f32f32|implicit_convolve_sgemm|"
     r"convolve_common_engine_float|conv2d_c\d+_k\d+|conv2d_grouped_direct|"
     r"winograd.*(?:float|f32)|fft\w*conv|depthwise"),
    # cuDNN xmma / CUTLASS fprop; cuDNN runtime-fusion kernels (fp8 conv + fused epilogue);
    # the copy-free engine's Triton 1x1 convolution (tl.dot)
    ("tensor_core_conv", rf"xmma_fprop|tensorop\w*fprop|fprop\w*tensorop|"
     rf"_fprop_\w*{_TENSOR_TYPES}|cudnn.*conv.*(?:hmma|imma|gmma)|"
     r"cudnn_generated\w*conv(?:Fwd|_fprop)|^pointwise_conv_into$"),
    # cuBLAS nvjet on Hopper, CUTLASS, cuBLAS sm80/sm90 kernels
    ("tensor_core_gemm", r"nvjet_|tensorop\w*gemm|gemm\w*tensorop|xmma_gemm|s1688gemm|"
     r"s16816gemm|h16816gemm|hmma|gmma|wgmma|sm90_\w*gemm"),
    ("simt_gemm", r"sgemm|dgemm|gemv|gemmSN|gemm_kernel"),
    ("triton", r"^triton_|^\w*triton_(?:poi|red|per|tem)"),
    ("copy_concat", r"CatArrayBatchedCopy|direct_copy_kernel|copy_kernel|cat_|memcpy|"
     r"Memcpy|fill_kernel|FillFunctor|init_device_workspace"),
    ("pooling_upsample", r"max_pool|avg_pool|adaptive_\w*pool|upsample|interpolate|"
     r"pool\w*forward"),
    ("reduction", r"reduce_kernel|softmax|Reduce|norm_kernel|cunn_SoftMax|sum_kernel|"
     r"argmax|topk|sort"),
    # _quantize: yolo_sm's Triton E4M3 quantiser; batch_norm...: eval-mode BatchNorm
    ("elementwise", r"elementwise_kernel|vectorized_elementwise|unrolled_elementwise|"
     r"Functor|silu|sigmoid|relu|add_kernel|mul_kernel|where_kernel|^_quantize$|"
     r"batch_norm_transform|batch_norm_elemt|bn_fw_inf"),
))  # fmt: skip
_OPS = re.compile(
    r"CUDAFunctor_(\w+?)\b|(silu|sigmoid|relu|gelu|hardswish|tanh)_kernel|"
    r"(MulFunctor|AddFunctor|DivFunctor)|(CatArrayBatchedCopy)|(direct_copy)_kernel|"
    r"(max_pool|avg_pool|upsample_nearest|upsample_bilinear)|(softmax)|(nchwToNhwc|nhwcToNchw)",
    re.I,
)
_PRECISION = re.compile(r"(bf16|f16|tf32|e4m3|e5m2|i8|s8|f32f32_f32f32|hsh|tst|s1688|s16816)", re.I)
_PRECISION_NAMES = {"hsh": "f16", "tst": "bf16", "s1688": "tf32", "s16816": "f16", "s8": "i8"}
_PRECISION_NAMES["f32f32_f32f32"] = "f32"


def classify(name: str) -> str:
    """The kernel class of one demangled kernel name (see :data:`CLASSES`)."""
    for cls, rx in RULES:
        if rx.search(name):
            return cls
    return "other"


def op_of(name: str) -> str:
    m = _OPS.search(name)
    if not m:
        return ""
    op = next(g for g in m.groups() if g)
    return "cat" if op == "CatArrayBatchedCopy" else op.lower().removesuffix("functor")


def precision_of(name: str, cls: str) -> str:
    if cls not in ("tensor_core_conv", "simt_conv", "tensor_core_gemm", "simt_gemm"):
        return ""
    m = _PRECISION.search(name)
    if not m:
        return "f32" if cls.startswith("simt") else ""
    tok = m.group(1).lower()
    return _PRECISION_NAMES.get(tok, tok)


def add_kernel_class(df):
    """A copy of ``df`` with ``kernel_class``, ``op`` and ``kernel_precision`` columns."""
    out = df.copy()
    names = out["kernel_name"].astype(str)
    cache = {n: classify(n) for n in names.unique()}
    out["kernel_class"] = names.map(cache)
    out["op"] = names.map({n: op_of(n) for n in cache})
    out["kernel_precision"] = [precision_of(n, cache[n]) for n in names]
    return out


def with_kernel_class(df):
    """``df`` where it has a ``kernel_class`` column (a trace's), else :func:`add_kernel_class`."""
    return df if "kernel_class" in df else add_kernel_class(df)


def class_shares(df, by=()):
    """Share of kernel time and of launches per kernel class (tidy, one row per group x class)."""
    df = with_kernel_class(df)
    keys = list(by) + ["kernel_class"]
    g = df.groupby(keys, observed=True).duration_us.agg(kernels="size", time_us="sum")
    g = g.reset_index()
    totals = (
        g.groupby(list(by))[["kernels", "time_us"]].transform("sum")
        if by
        else g[["kernels", "time_us"]].sum()
    )
    g["time_share"] = g.time_us / totals["time_us"]
    g["launch_share"] = g.kernels / totals["kernels"]
    return g

"""Int8Conv's kernels ``triton`` (:func:`conv_int8`, implicit-GEMM NHWC, fused quantiser and
epilogue) and ``intmm`` (:func:`conv1x1_int_mm`, a 1x1 conv as ``torch._int_mm``)."""

from __future__ import annotations

import functools
import inspect

import torch

from yolo_sm.contract.errors import NotAvailableError
from yolo_sm.core.engines.qconv import CL, conv_out_hw

#: the tiles the convolution's autotuner times per (C, K, R, S, stride, output size) class:
#: (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages); large pixel tiles first (YOLO: many pixels)
TILES = (
    (128, 128, 64, 8, 3),
    (128, 64, 64, 4, 4),
    (64, 64, 64, 4, 4),
)
#: the smallest channel block a tile uses (tl.dot's int8 reduction needs K >= 32 per step)
MIN_BLOCK_K = 32


def _kernels(x: torch.Tensor, kernels):
    """``kernels``, else this process's (NotAvailableError off a CUDA device)."""
    if kernels is not None:
        return kernels
    if not x.is_cuda:
        raise NotAvailableError("the Triton int8 convolution runs on a CUDA device only")
    return compiled_kernels()


def build_kernels():
    """(autotuned conv kernel, epilogue kernel, triton module), jitted on first launch;
    NotAvailableError without Triton. ``TRITON_INTERPRET=1`` runs them on CPU tensors."""
    try:
        import triton
        import triton.language as tl
        import triton.testing
    except ImportError as e:  # pragma: no cover - Triton ships with torch's CUDA wheels
        what = "int8 kernels triton and intmm need Triton"
        raise NotAvailableError(f"{what} (pip install triton)") from e

    configs = [
        triton.Config(
            {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_warps=w, num_stages=s
        )
        for m, n, k, w, s in TILES
    ]

    def prune(configs, named_args, **kwargs):
        # no channel block wider than the input channels (rounded up to a power of 2, at least
        # MIN_BLOCK_K), no output-channel block wider than the output channels
        c, k = named_args["C"], named_args["K"]
        cap_k = max(MIN_BLOCK_K, triton.next_power_of_2(c))
        cap_n = max(32, triton.next_power_of_2(k))
        kept = [
            cfg
            for cfg in configs
            if cfg.kwargs["BLOCK_K"] <= cap_k and cfg.kwargs["BLOCK_N"] <= cap_n
        ]
        return kept or configs[-1:]

    def bench(fn, quantiles=None):  # short: a tile's rank shows within a few calls
        return triton.testing.do_bench(fn, warmup=3, rep=10, quantiles=quantiles)

    short = "do_bench" in inspect.signature(triton.autotune).parameters  # older Triton: none

    @triton.autotune(
        configs=configs,
        key=["C", "K", "H", "W", "HO", "WO", "STRIDE_H", "STRIDE_W"],
        prune_configs_by={"early_config_prune": prune},
        **({"do_bench": bench} if short else {}),
    )
    # one compiled kernel per tile, filter and channel counts: the pixel counts, strides and
    # paddings are not specialised on (each distinct value class would compile anew)
    @triton.jit(
        do_not_specialize=["M", "H", "W", "HO", "WO", "STRIDE_H", "STRIDE_W", "PAD_H", "PAD_W"]
    )
    def _conv(
        x_ptr, w_ptr, scale_ptr, bias_ptr, y_ptr,
        M, H, W, C, K, HO, WO, inv_in_scale,
        STRIDE_H, STRIDE_W, PAD_H, PAD_W,
        R: tl.constexpr, S: tl.constexpr,
        HAS_BIAS: tl.constexpr, SILU: tl.constexpr, QUANTIZE: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        grid_m = tl.cdiv(M, BLOCK_M)
        grid_n = tl.cdiv(K, BLOCK_N)
        # grouped order: GROUP_M pixel tiles share the weight tiles while they sit in L2
        per_group = GROUP_M * grid_n
        first_m = (pid // per_group) * GROUP_M
        size_m = min(grid_m - first_m, GROUP_M)
        pid_m = first_m + ((pid % per_group) % size_m)
        pid_n = (pid % per_group) // size_m

        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        m_ok = offs_m < M
        n_ok = offs_n < K
        img = offs_m // (HO * WO)
        pix = offs_m % (HO * WO)
        oh = pix // WO
        ow = pix % WO
        taps = R * S * C
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        for r in tl.static_range(R):
            ih = oh * STRIDE_H - PAD_H + r
            for s in tl.static_range(S):
                iw = ow * STRIDE_W - PAD_W + s
                inside = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
                row = ((img.to(tl.int64) * H + ih) * W + iw) * C  # NHWC offset of the pixel
                for c0 in range(0, C, BLOCK_K):
                    ck = c0 + offs_k
                    c_ok = ck < C
                    a = tl.load(
                        x_ptr + row[:, None] + ck[None, :],
                        mask=inside[:, None] & c_ok[None, :],
                        other=0,
                    )
                    if QUANTIZE:
                        v = a.to(tl.float32) * inv_in_scale
                        v = tl.minimum(tl.maximum(v, -127.0), 127.0)
                        v = tl.where(v >= 0, v + 0.5, v - 0.5)  # truncation: halves away
                        a = v.to(tl.int32).to(tl.int8)
                    # weight (K, R, S, C) row-major: K-major tiles, transposed for the MMA
                    b = tl.load(
                        w_ptr + offs_n[:, None] * taps + ((r * S + s) * C + ck)[None, :],
                        mask=n_ok[:, None] & c_ok[None, :],
                        other=0,
                    )
                    acc = tl.dot(a, tl.trans(b), acc, out_dtype=tl.int32)
        scale = tl.load(scale_ptr + offs_n, mask=n_ok, other=0.0)
        y = acc.to(tl.float32) * scale[None, :]
        if HAS_BIAS:
            y += tl.load(bias_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
        if SILU:
            y = y * tl.sigmoid(y)
        tl.store(
            y_ptr + offs_m[:, None].to(tl.int64) * K + offs_n[None, :],
            y.to(y_ptr.dtype.element_ty),
            mask=m_ok[:, None] & n_ok[None, :],
        )

    @triton.jit
    def _epilogue(
        acc_ptr, scale_ptr, bias_ptr, y_ptr, M, K,
        HAS_BIAS: tl.constexpr, SILU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    ):  # fmt: skip
        offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (offs_m < M)[:, None] & (offs_n < K)[None, :]
        at = offs_m[:, None].to(tl.int64) * K + offs_n[None, :]
        y = tl.load(acc_ptr + at, mask=mask, other=0).to(tl.float32)
        y = y * tl.load(scale_ptr + offs_n, mask=offs_n < K, other=0.0)[None, :]
        if HAS_BIAS:
            y += tl.load(bias_ptr + offs_n, mask=offs_n < K, other=0.0)[None, :]
        if SILU:
            y = y * tl.sigmoid(y)
        tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=mask)

    return _conv, _epilogue, triton


#: this process's kernels (built once; the Triton kernels compile on first launch)
compiled_kernels = functools.cache(build_kernels)


def inverse_scale(scale) -> float:
    """``1 / scale`` computed in float32, as torch's quantisation reference divides (the
    quantising kernels multiply by it)."""
    return float(1.0 / torch.tensor(float(scale), dtype=torch.float32))


def packed_weight(weight_int8: torch.Tensor) -> torch.Tensor:
    """An int8 conv weight (K, C, R, S) as the Triton kernel reads it: (K, R, S, C), contiguous
    (each output channel's filter taps, channels innermost)."""
    return weight_int8.permute(0, 2, 3, 1).contiguous()


def out_size(h: int, w: int, r: int, s: int, stride, padding) -> tuple[int, int]:
    """(HO, WO) of a convolution with dilation 1."""
    return conv_out_hw(h, w, (r, s), padding, stride)


def conv_int8(
    x: torch.Tensor,
    weight_packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    *,
    r: int,
    s: int,
    stride=(1, 1),
    padding=(0, 0),
    input_scale: float = 1.0,
    silu: bool = False,
    quantized_input: bool = False,
    out_dtype: torch.dtype | None = None,
    tile: dict | None = None,
    kernels=None,
) -> torch.Tensor:
    """Int8 conv of ``x`` (N, C, H, W, read as NHWC) with ``weight_packed`` (:func:`packed_weight`),
    ``scale`` (K,) = input x weight scale, ``bias`` (K,) or None -> (N, K, HO, WO) channels_last
    in ``out_dtype``. ``quantized_input``: ``x`` is int8 already; ``tile`` skips autotuning."""
    conv, _, triton = _kernels(x, kernels)
    if tile is not None:
        conv = conv.fn
    n, c, h, w = x.shape
    k = weight_packed.shape[0]
    if weight_packed.shape[1:] != (r, s, c):
        raise ValueError(f"packed weight {tuple(weight_packed.shape)} is not (K, {r}, {s}, {c})")
    if quantized_input != (x.dtype == torch.int8):
        raise ValueError(f"quantized_input={quantized_input} with an input of {x.dtype}")
    x = x.contiguous(memory_format=CL)
    ho, wo = out_size(h, w, r, s, stride, padding)
    dtype = out_dtype or (torch.float16 if quantized_input else x.dtype)
    y = torch.empty((n, k, ho, wo), dtype=dtype, device=x.device, memory_format=CL)
    m = n * ho * wo

    def grid(meta):
        meta = {**meta, **(tile or {})}
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(k, meta["BLOCK_N"]),)

    conv[grid](
        x, weight_packed, scale, bias if bias is not None else scale, y,
        m, h, w, c, k, ho, wo, inverse_scale(input_scale),
        stride[0], stride[1], padding[0], padding[1],
        R=r, S=s, HAS_BIAS=bias is not None, SILU=bool(silu), QUANTIZE=not quantized_input,
        **(tile or {}),
    )  # fmt: skip
    return y


def last_tile() -> dict | None:
    """The tile the autotuner chose for the convolution :func:`conv_int8` ran last (None before
    any call): BLOCK_M / BLOCK_N / BLOCK_K / GROUP_M, warps and stages."""
    conv, _, _ = compiled_kernels()
    cfg = getattr(conv, "best_config", None)
    if cfg is None:
        return None
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def dequant_epilogue(
    acc: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    silu: bool,
    dtype,
    kernels=None,
) -> torch.Tensor:
    """``acc`` (M, K) int32 -> ``acc * scale + bias`` (and SiLU) as ``dtype``, one pass."""
    _, epilogue, triton = _kernels(acc, kernels)
    m, k = acc.shape
    y = torch.empty((m, k), dtype=dtype, device=acc.device)
    grid = (triton.cdiv(m, 64), triton.cdiv(k, 64))
    epilogue[grid](
        acc, scale, bias if bias is not None else scale, y, m, k,
        HAS_BIAS=bias is not None, SILU=bool(silu), BLOCK_M=64, BLOCK_N=64,
    )  # fmt: skip
    return y


def int_mm_eligible(c: int, k: int, r: int, s: int, stride, padding) -> bool:
    """Whether ``torch._int_mm`` can run this convolution: 1x1, stride 1, no padding, channel
    counts multiples of 8 (cuBLASLt's int8 GEMM)."""
    one_by_one = (r, s, *stride, *padding) == (1, 1, 1, 1, 0, 0)
    return one_by_one and not (c % 8 or k % 8)


def conv1x1_int_mm(
    xq: torch.Tensor,
    weight_ck: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    *,
    silu: bool = False,
    out_dtype: torch.dtype = torch.float16,
) -> torch.Tensor:
    """A 1x1 stride-1 int8 conv: ``xq`` (N, C, H, W) int8 channels_last x ``weight_ck`` (C, K) int8
    -> (N, K, H, W) channels_last in ``out_dtype`` via :func:`dequant_epilogue`."""
    _kernels(xq, None)  # NotAvailableError off a GPU
    n, c, h, w = xq.shape
    k = weight_ck.shape[1]
    a = xq.contiguous(memory_format=CL).permute(0, 2, 3, 1).reshape(-1, c)
    y = dequant_epilogue(torch._int_mm(a, weight_ck), scale, bias, silu, out_dtype)
    return y.view(n, h, w, k).permute(0, 3, 1, 2)

"""The GPU's own ceilings, measured: dense matmul TFLOP/s per precision, device-to-device copy
bandwidth, and host-to-device copies (one 640x640x3 fp16 frame, and large pinned buffers).

The roofline and the "fraction of peak" figures divide by these instead of datasheet numbers
(plan step ``ceilings``; ``yolo_sm.contract.datasets.load("h200/ceilings")``). A matmul of
8192^3 on random data is the usual way to reach a tensor-core peak from PyTorch (cuBLAS picks
its best kernel); a copy of a 1 GiB buffer reads and writes each byte once (2 bytes of traffic
per byte copied).
"""

from __future__ import annotations

from yolo_sm.collect.provenance import sm_clock_mhz
from yolo_sm.collect.timing import measure
from yolo_sm.contract.errors import UserError

MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


#: How the matmul operands are filled: ``randn`` (the ceiling: every bit toggles, as in real
#: data) or ``zeros`` (a diagnostic: tensor cores draw less power on zeros, so where a randn
#: matmul is power-limited the zeros one runs at higher clocks).
FILLS = ("randn", "zeros")


def _operand(n: int, device: str, gen, fill: str, dtype=None):
    import torch

    if fill == "zeros":
        return torch.zeros(n, n, device=device, dtype=dtype)
    return torch.randn(n, n, device=device, dtype=dtype, generator=gen)


def _matmul_fn(prec: str, n: int, device: str, fill: str = "randn"):
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    if prec == "fp8":
        if not hasattr(torch, "_scaled_mm") or not str(device).startswith("cuda"):
            return None
        a = _operand(n, device, gen, fill).to(torch.float8_e4m3fn)
        b = _operand(n, device, gen, fill).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dtype = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }[prec]
    a = _operand(n, device, gen, fill, dtype)
    b = _operand(n, device, gen, fill, dtype)
    return lambda: torch.matmul(a, b)


def measure_ceilings(
    device: str = "cuda",
    n: int | tuple[int, ...] = 8192,
    copy_bytes: int = 1 << 30,
    budget_ms: float = 300.0,
    precisions=MATMUL_DTYPES,
    simt_max_n: int = 8192,
    fill: str = "randn",
):
    """One row per ceiling: ``ceiling`` (e.g. ``matmul_fp16``, ``copy_d2d``, ``copy_h2d_frame``),
    ``value`` in ``unit`` (TFLOP/s, GB/s or ms), the median / IQR of the timed calls and the
    problem size. On a CPU only the matmuls run (useful for tests, not a ceiling of interest).

    ``n``: one size or several. With several, each precision is timed at each size (a row
    ``matmul_<prec>_n<size>``; fp32 on the SIMT units only up to ``simt_max_n``, where bigger
    sizes take seconds per call) and ``matmul_<prec>`` is the fastest of them: cuBLAS's best
    kernel and the clocks it sustains under power differ per shape.

    ``fill`` (:data:`FILLS`): the matmul operands, random normal (the default, the ceiling) or
    zeros (a diagnostic of power-limited clocks). Each matmul row records ``fill`` and
    ``sm_clock_end_mhz``, the SM clock (NVML) right after its timed calls (None on a CPU); the
    copy rows (GPU only, measured whatever the fill) have neither."""
    import pandas as pd
    import torch

    if fill not in FILLS:
        raise UserError(f"unknown matmul fill {fill!r}; use one of {', '.join(FILLS)}")
    cuda = str(device).startswith("cuda")
    rows = []

    def add(name, m, value, unit, size, clock=None, row_fill=None):
        rows.append(
            {
                "ceiling": name,
                "value": value,
                "unit": unit,
                "size": size,
                "median_ms": m.median_ms,
                "iqr_ms": m.iqr_ms,
                "n_samples": m.n,
                "fill": row_fill,
                "sm_clock_end_mhz": clock,
            }
        )

    sizes = (int(n),) if isinstance(n, int) else tuple(int(x) for x in n)
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for prec in precisions:
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            best = None
            for size in sizes:
                if prec == "fp32" and size > simt_max_n and size != min(sizes):
                    continue
                fn = _matmul_fn(prec, size, device, fill)
                if fn is None:
                    break
                m = measure(fn, device=device, budget_ms=budget_ms)
                clock = sm_clock_mhz(device)
                tflops = 2 * size**3 / (m.median_ms * 1e-3) / 1e12
                if len(sizes) > 1:
                    add(f"matmul_{prec}_n{size}", m, tflops, "TFLOP/s", f"{size}^3", clock, fill)
                if best is None or tflops > best[1]:
                    best = (m, tflops, size, clock)
                del fn
            if best is not None:
                m, tflops, size, clock = best
                add(f"matmul_{prec}", m, tflops, "TFLOP/s", f"{size}^3", clock, fill)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    if cuda:
        src = torch.empty(copy_bytes, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        m = measure(lambda: dst.copy_(src), device=device, budget_ms=budget_ms)
        add("copy_d2d", m, 2 * copy_bytes / (m.median_ms * 1e-3) / 1e9, "GB/s", f"{copy_bytes} B")
        host = torch.empty(copy_bytes, dtype=torch.uint8).pin_memory()
        m = measure(lambda: dst.copy_(host, non_blocking=True), device=device, budget_ms=budget_ms)
        add(
            "copy_h2d_pinned", m, copy_bytes / (m.median_ms * 1e-3) / 1e9, "GB/s", f"{copy_bytes} B"
        )
        frame = torch.empty(3 * 640 * 640, dtype=torch.float16).pin_memory()
        fdst = torch.empty_like(frame, device=device)
        m = measure(
            lambda: fdst.copy_(frame, non_blocking=True), device=device, budget_ms=budget_ms
        )
        add("copy_h2d_frame_fp16", m, m.median_ms, "ms", f"{frame.numel() * 2} B (3x640x640 fp16)")
    if not rows:
        raise UserError(f"no ceiling could be measured on {device}")
    return pd.DataFrame(rows)

"""The GPU's own ceilings: dense matmul TFLOP/s per precision (int8: TOP/s, the faster of
``torch._int_mm`` and cuDNN's int8 1x1 conv) and copy bandwidths, each in two regimes with NVML's SM
clock and power: ``burst`` (a few calls after a rest: what every share of peak divides by) and
``sustained`` (back to back, the second half: what a power-limited run settles to)."""

from __future__ import annotations

import math
import statistics
import threading
import time
import warnings
from types import SimpleNamespace

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.core.devices import nvml_handle, nvml_index
from yolo_sm.core.engines import qconv
from yolo_sm.core.engines.int8 import quantize_int8
from yolo_sm.core.provenance import sm_clock_mhz
from yolo_sm.core.timing import CpuTimer, CudaTimer

MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
REGIMES = ("burst", "sustained")
#: matmul operands: ``randn`` (the ceiling) or ``zeros`` (a power diagnostic: tensor cores draw
#: less on zeros, so a power-limited randn matmul runs faster on them)
FILLS = ("randn", "zeros")
_NVML_FI_DEV_POWER_INSTANT = 186  # nvml.h NVML_FI_DEV_POWER_INSTANT (instantaneous draw, mW)


def _int8(shape, device, gen, fill):
    import torch

    if fill == "zeros":
        return torch.zeros(shape, dtype=torch.int8, device=device)
    return torch.randint(-128, 128, shape, device=device, dtype=torch.int8, generator=gen)


def _matmul_fn(prec: str, n: int, device: str, fill: str = "randn"):
    """A zero-argument n^3 matmul in ``prec``, or None where this torch / device lacks it."""
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    cuda = str(device).startswith("cuda")

    def operand(dtype=None):
        if fill == "zeros":
            return torch.zeros(n, n, device=device, dtype=dtype)
        return torch.randn(n, n, device=device, dtype=dtype, generator=gen)

    if prec == "fp8":
        if not hasattr(torch, "_scaled_mm") or not cuda:
            return None
        a, b = (operand().to(torch.float8_e4m3fn) for _ in range(2))
        one, b = torch.tensor(1.0, device=device), b.t()  # column-major
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if prec == "int8":
        if not hasattr(torch, "_int_mm") or not cuda:
            return None
        a, b = _int8((n, n), device, gen, fill), _int8((n, n), device, gen, fill).t()
        return lambda: torch._int_mm(a, b)
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
             "bf16": torch.bfloat16}[prec]  # fmt: skip
    a, b = operand(dtype), operand(dtype)
    return lambda: torch.matmul(a, b)


def _cudnn_int8_fn(n: int, device: str, fill: str = "randn"):
    """A zero-argument n^3 int8 GEMM as cuDNN's int8 1x1 NHWC convolution (int8 out, else FLOAT);
    None off CUDA or without cuDNN's frontend."""
    import torch

    if not str(device).startswith("cuda"):
        return None
    try:
        qconv.import_cudnn("the int8 ceiling")
    except NotAvailableError:
        return None
    gen = torch.Generator(device=device).manual_seed(0)
    h = 1 << (int(math.log2(n)) // 2)
    shape, cl = (1, n, h, n // h), torch.channels_last
    xq = _int8(shape, device, gen, fill).contiguous(memory_format=cl)
    wq = _int8((n, n, 1, 1), device, gen, fill).contiguous(memory_format=cl)
    mod = SimpleNamespace(  # requantise the accumulator (|acc| ~ 73^2 sqrt(n)) into int8
        weight_q=wq, weight_scale=torch.ones(n, device=device), bias=None, silu=False,
        input_scale=torch.tensor(1.0 / (5000.0 * math.sqrt(n))), padding=(0, 0), stride=(1, 1),
        dilation=(1, 1),
    )  # fmt: skip
    x = torch.empty(shape, dtype=torch.float16, device=device).contiguous(memory_format=cl)
    declined = []
    for output, fused in (("INT8", True), ("FLOAT", False)):
        fmt = qconv.GraphFormat(operand="INT8", compute="INT32", quantize=quantize_int8,
                                plans=lambda: 6, tuned={}, output=output,
                                fused=fused)  # fmt: skip
        try:
            graph = qconv.CudnnQuantConv(mod, x, fmt, "the int8 ceiling")
        except Exception as e:  # noqa: BLE001 - cuDNN declines some graphs: try the next
            declined.append(f"{output}: {type(e).__name__}: {e}"[:200])
            continue
        return lambda: graph.execute(xq)
    raise RuntimeError("cuDNN built no int8 GEMM graph (" + "; ".join(declined) + ")")


#: per precision, (name suffix, what runs the matmul on a GPU, builder): the fastest is the
#: precision's ceiling (on a CPU the label drops the GPU library in brackets)
MATMUL_IMPLS = {
    **{p: (("", f"torch.matmul (cuBLAS{', TF32' if p == 'tf32' else ''})", _matmul_fn),)
       for p in ("fp32", "tf32", "fp16", "bf16")},
    "fp8": (("", "torch._scaled_mm (cuBLASLt)", _matmul_fn),),
    "int8": (
        ("", "torch._int_mm (cuBLASLt)", _matmul_fn),
        ("cudnn", "cuDNN int8 1x1 convolution", lambda _p, *a: _cudnn_int8_fn(*a)),
    ),
}  # fmt: skip


class NvmlSampler:
    """Samples SM clock (MHz) and power (W) every ``period_s`` from a thread inside ``with`` (NaN
    without NVML)."""

    def __init__(self, device: str, period_s: float = 0.005):
        self.period_s, self.clocks, self.power, self.limit_w = period_s, [], [], math.nan
        self._stop, self._thread, self.nvml, self.handle = threading.Event(), None, None, None
        if str(device).startswith("cuda"):
            try:
                self.nvml, self.handle = nvml_handle(nvml_index(device))
                self.limit_w = self.nvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1e3
            except Exception:  # noqa: BLE001 - no NVML: the figures stay NaN
                pass

    def sample(self) -> None:
        nvml, h = self.nvml, self.handle
        try:
            self.clocks.append(float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)))
        except Exception:  # noqa: BLE001
            pass
        try:
            fv = nvml.nvmlDeviceGetFieldValues(h, [_NVML_FI_DEV_POWER_INSTANT])[0]
            if fv.nvmlReturn != 0:
                raise RuntimeError("no instantaneous power")
            self.power.append(float(fv.value.uiVal) / 1e3)
        except Exception:  # noqa: BLE001 - older drivers: the averaged reading
            try:
                self.power.append(nvml.nvmlDeviceGetPowerUsage(h) / 1e3)
            except Exception:  # noqa: BLE001
                pass

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.period_s)

    def __enter__(self):
        self.clocks, self.power = [], []
        if self.handle is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.sample()  # at least one reading, however short the block

    def stats(self) -> dict:
        """Clock (MHz) and power (W) summaries, the enforced power limit and the sample count."""

        def agg(values, f):
            return float(f(values)) if values else math.nan

        c, p = self.clocks, self.power
        return {"sm_clock_mean_mhz": agg(c, statistics.fmean), "sm_clock_min_mhz": agg(c, min),
                "power_mean_w": agg(p, statistics.fmean), "power_max_w": agg(p, max),
                "power_limit_w": self.limit_w, "nvml_samples": len(c)}  # fmt: skip


def time_regimes(fn, device: str, *, burst_ms=30.0, sustain_ms=800.0, rest_s=0.3, timer=None,
                 sampler=None, sleep=time.sleep) -> dict:  # fmt: skip
    """``{"burst": (samples_ms, nvml stats), "sustained": (...)}`` of ``fn`` (burst after
    ``rest_s``; sustained: the second half)."""
    timer = timer or (CudaTimer() if str(device).startswith("cuda") else CpuTimer())
    sampler = sampler or NvmlSampler(device)
    timer.sync()
    timer.time_calls(fn, 1)  # the first call pays for library set-up: not an estimate
    est = max(statistics.median(timer.time_calls(fn, 3)), 1e-3)
    sleep(rest_s)
    with sampler:
        burst = timer.time_calls(fn, max(3, math.ceil(burst_ms / est)))
    out = {"burst": (burst, sampler.stats())}
    with sampler:
        sustained = timer.time_calls(fn, max(6, math.ceil(sustain_ms / est)))
    out["sustained"] = (sustained[len(sustained) // 2 :], sampler.stats())
    return out


def measure_ceilings(device="cuda", n=(4096, 8192, 16384), copy_bytes=1 << 30, budget_ms=800.0,
                     precisions=MATMUL_DTYPES, simt_max_n=8192, fill="randn", burst_ms=30.0,
                     rest_s=0.3):  # fmt: skip
    """One row per ceiling and regime: ``value`` in ``unit`` (TFLOP/s, TOP/s, GB/s, ms), timing
    and NVML's readings; fp32 runs only up to ``simt_max_n`` beyond the smallest size."""
    import pandas as pd
    import torch

    if fill not in FILLS:
        raise UserError(f"unknown matmul fill {fill!r}; use one of {', '.join(FILLS)}")
    cuda = str(device).startswith("cuda")
    rows = []
    timing = {"burst_ms": burst_ms, "sustain_ms": budget_ms, "rest_s": rest_s if cuda else 0.0}

    def add(name, regime, samples, stats, value, unit, size, row_fill=None, kernel=None):
        q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [math.nan] * 3
        rows.append({"ceiling": name, "regime": regime, "value": value, "unit": unit,
                     "size": size, "median_ms": statistics.median(samples), "iqr_ms": q[2] - q[0],
                     "n_samples": len(samples), "fill": row_fill, "kernel": kernel, **stats,
                     "sm_clock_end_mhz": sm_clock_mhz(device)})  # fmt: skip

    sizes = (int(n),) if isinstance(n, int) else tuple(int(x) for x in n)
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for prec in precisions:
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            unit, best, impls = "TOP/s" if prec == "int8" else "TFLOP/s", {}, MATMUL_IMPLS[prec]
            for suffix, kernel, build in impls:
                kernel = kernel if cuda else kernel.split(" (")[0]
                name = f"matmul_{prec}_{suffix}" if suffix else f"matmul_{prec}"
                for size in sizes:
                    if prec == "fp32" and size > simt_max_n and size != min(sizes):
                        continue
                    try:
                        fn = build(prec, size, device, fill)
                        measured = time_regimes(fn, device, **timing) if fn is not None else None
                    except RuntimeError as e:  # this torch / GPU lacks the kernel: no row, said
                        warnings.warn(f"{name} at {size}^3 not measured: {e}", stacklevel=2)
                        measured = None
                    if measured is None:
                        break
                    for regime, (samples, stats) in measured.items():
                        value = 2 * size**3 / (statistics.median(samples) * 1e-3) / 1e12
                        args = (regime, samples, stats, value, unit, f"{size}^3", fill, kernel)
                        if len(sizes) > 1 or len(impls) > 1:
                            add(f"{name}_n{size}", *args)
                        if regime not in best or value > best[regime][3]:
                            best[regime] = args
                    del fn
            for args in best.values():
                add(f"matmul_{prec}", *args)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    if cuda:
        src = torch.empty(copy_bytes, dtype=torch.uint8, device=device)
        dst, host = torch.empty_like(src), torch.empty(copy_bytes, dtype=torch.uint8).pin_memory()
        frame = torch.empty(3 * 640 * 640, dtype=torch.float16).pin_memory()
        fdst, size = torch.empty_like(frame, device=device), f"{copy_bytes} B"
        copies = (
            ("copy_d2d", lambda: dst.copy_(src), 2 * copy_bytes, size),
            ("copy_h2d_pinned", lambda: dst.copy_(host, non_blocking=True), copy_bytes, size),
            ("copy_d2h_pinned", lambda: host.copy_(dst, non_blocking=True), copy_bytes, size),
            ("copy_h2d_frame_fp16", lambda: fdst.copy_(frame, non_blocking=True), None,
             f"{frame.numel() * 2} B (3x640x640 fp16)"),
        )  # fmt: skip
        for name, fn, moved, size in copies:
            for regime, (samples, stats) in time_regimes(fn, device, **timing).items():
                med = statistics.median(samples)
                if moved is None:
                    add(name, regime, samples, stats, med, "ms", size)
                else:
                    add(name, regime, samples, stats, moved / (med * 1e-3) / 1e9, "GB/s", size)
        del src, dst, host
    if not rows:
        raise UserError(f"no ceiling could be measured on {device}")
    return pd.DataFrame(rows)

"""The GPU's own ceilings, measured: dense matmul TFLOP/s per precision (fp32, tf32, fp16, bf16,
fp8 through ``torch._scaled_mm``, int8 in TOP/s through ``torch._int_mm`` and through cuDNN's int8
1x1 convolution as a GEMM, the faster of both), and copy bandwidths
(device to device, pinned host to device and back, one 640x640x3 fp16 frame to the device).

Each figure is measured in two regimes, the SM clock and the power draw read through NVML
during each:

* ``burst``: after a rest (``rest_s``), a few calls worth ``burst_ms``: what a kernel that runs
  for milliseconds between idle gaps meets, before the power limiter pulls the clock down. The
  roofline and every share of peak divide by it (a ceiling that measured work exceeds means
  nothing).
* ``sustained``: the same call back to back for ``sustain_ms``, the median of the second half:
  what a long, power-limited run settles to.

A matmul on random normal data is the usual way to reach a tensor-core peak from PyTorch
(cuBLAS picks its best kernel); several shapes are timed and the fastest is the precision's
figure. A copy reads and writes each byte once (device to device: 2 bytes of traffic per byte).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
import warnings
from types import SimpleNamespace

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.core.engines import qconv
from yolo_sm.core.engines.int8 import quantize_int8
from yolo_sm.core.provenance import sm_clock_mhz
from yolo_sm.core.timing import CpuTimer, CudaTimer

MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
REGIMES = ("burst", "sustained")

#: How the matmul operands are filled: ``randn`` (the ceiling: every bit toggles, as in real
#: data) or ``zeros`` (a diagnostic: tensor cores draw less power on zeros, so where a randn
#: matmul is power-limited the zeros one runs at higher clocks).
FILLS = ("randn", "zeros")

_NVML_FI_DEV_POWER_INSTANT = 186  # nvml.h NVML_FI_DEV_POWER_INSTANT (instantaneous draw, mW)


def _operand(rows: int, cols: int, device: str, gen, fill: str, dtype=None):
    import torch

    if fill == "zeros":
        return torch.zeros(rows, cols, device=device, dtype=dtype)
    return torch.randn(rows, cols, device=device, dtype=dtype, generator=gen)


def _matmul_fn(prec: str, n: int, device: str, fill: str = "randn"):
    """A zero-argument n^3 matmul in ``prec``, or None where this torch / device lacks it."""
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    cuda = str(device).startswith("cuda")
    if prec == "fp8":
        if not hasattr(torch, "_scaled_mm") or not cuda:
            return None
        a = _operand(n, n, device, gen, fill).to(torch.float8_e4m3fn)
        b = _operand(n, n, device, gen, fill).to(torch.float8_e4m3fn).t()  # column-major
        one = torch.tensor(1.0, device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if prec == "int8":
        if not hasattr(torch, "_int_mm") or not cuda:
            return None
        if fill == "zeros":
            a = torch.zeros(n, n, device=device, dtype=torch.int8)
            b = torch.zeros(n, n, device=device, dtype=torch.int8).t()
        else:
            a = torch.randint(-128, 128, (n, n), device=device, dtype=torch.int8, generator=gen)
            b = torch.randint(-128, 128, (n, n), device=device, dtype=torch.int8, generator=gen).t()
        return lambda: torch._int_mm(a, b)
    dtype = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }[prec]
    a = _operand(n, n, device, gen, fill, dtype)
    b = _operand(n, n, device, gen, fill, dtype)
    return lambda: torch.matmul(a, b)


def _cudnn_int8_fn(n: int, device: str, fill: str = "randn"):
    """A zero-argument n^3 int8 GEMM run as cuDNN's int8 1x1 convolution over NHWC (M = the
    n pixels of one image, K = C = n channels, int32 accumulation), or None off CUDA or without
    cuDNN's frontend. cuBLASLt's int8 GEMM (``torch._int_mm``) is not always the fastest int8
    kernel a GPU runs (cuDNN's int8 convolutions can outrun it), so the int8 ceiling takes the
    faster of both and the table's ``kernel`` column says which. The graph writes int8
    (requantised per channel), else, where cuDNN declines that, the raw accumulator in FLOAT."""
    import torch

    if not str(device).startswith("cuda"):
        return None
    try:
        qconv.import_cudnn("the int8 ceiling")
    except NotAvailableError:
        return None
    gen = torch.Generator(device=device).manual_seed(0)
    h = 1 << (int(math.log2(n)) // 2)
    shape = (1, n, h, n // h)
    cl = torch.channels_last
    if fill == "zeros":
        xq = torch.zeros(shape, dtype=torch.int8, device=device)
        wq = torch.zeros((n, n, 1, 1), dtype=torch.int8, device=device)
    else:
        xq = torch.randint(-128, 128, shape, device=device, dtype=torch.int8, generator=gen)
        wq = torch.randint(-128, 128, (n, n, 1, 1), device=device, dtype=torch.int8, generator=gen)
    xq, wq = xq.contiguous(memory_format=cl), wq.contiguous(memory_format=cl)
    # requantise the accumulator (|acc| ~ 73^2 sqrt(n)) into int8's range
    mod = SimpleNamespace(
        weight_q=wq,
        weight_scale=torch.ones(n, device=device),
        input_scale=torch.tensor(1.0 / (5000.0 * math.sqrt(n))),
        bias=None,
        silu=False,
        padding=(0, 0),
        stride=(1, 1),
        dilation=(1, 1),
    )
    x = torch.empty(shape, dtype=torch.float16, device=device).contiguous(memory_format=cl)
    declined = []
    for output, fused in (("INT8", True), ("FLOAT", False)):
        fmt = qconv.GraphFormat(
            operand="INT8",
            compute="INT32",
            quantize=quantize_int8,
            plans=lambda: 6,
            seconds=1.5,
            tuned={},
            output=output,
            fused=fused,
        )
        try:
            graph = qconv.CudnnQuantConv(mod, x, fmt, "the int8 ceiling")
        except Exception as e:  # noqa: BLE001 - cuDNN declines some graphs: try the next
            declined.append(f"{output}: {type(e).__name__}: {e}"[:200])
            continue
        return lambda: graph.execute(xq)
    raise RuntimeError("cuDNN built no int8 GEMM graph (" + "; ".join(declined) + ")")


#: per precision, (name suffix, what runs the matmul on a GPU, builder): every implementation
#: is timed and the fastest is the precision's ceiling (on a CPU the label drops the GPU
#: library in brackets: torch.matmul runs without cuBLAS there)
MATMUL_IMPLS = {
    "fp32": (("", "torch.matmul (cuBLAS)", _matmul_fn),),
    "tf32": (("", "torch.matmul (cuBLAS, TF32)", _matmul_fn),),
    "fp16": (("", "torch.matmul (cuBLAS)", _matmul_fn),),
    "bf16": (("", "torch.matmul (cuBLAS)", _matmul_fn),),
    "fp8": (("", "torch._scaled_mm (cuBLASLt)", _matmul_fn),),
    "int8": (
        ("", "torch._int_mm (cuBLASLt)", _matmul_fn),
        ("cudnn", "cuDNN int8 1x1 convolution", lambda _p, *a: _cudnn_int8_fn(*a)),
    ),
}


class NvmlSampler:
    """Samples the SM clock (MHz) and power draw (W) every ``period_s`` in a thread while in a
    ``with`` block; :meth:`stats` summarises them. Without NVML (a CPU, no pynvml) every figure
    is NaN."""

    def __init__(self, device: str, period_s: float = 0.005):
        self.period_s = period_s
        self.clocks: list[float] = []
        self.power: list[float] = []
        self.limit_w = math.nan
        self._stop = threading.Event()
        self._thread = None
        self.nvml = self.handle = None
        if str(device).startswith("cuda"):
            try:
                import pynvml
                import torch

                pynvml.nvmlInit()
                index = torch.device(device).index or 0
                self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
                self.limit_w = pynvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1e3
            except Exception:  # noqa: BLE001 - no NVML: the figures stay NaN
                self.nvml = self.handle = None

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
        """``sm_clock_mean_mhz``, ``sm_clock_min_mhz``, ``power_mean_w``, ``power_max_w``,
        ``power_limit_w`` (the enforced limit) and ``nvml_samples``."""

        def agg(values, f):
            return float(f(values)) if values else math.nan

        return {
            "sm_clock_mean_mhz": agg(self.clocks, statistics.fmean),
            "sm_clock_min_mhz": agg(self.clocks, min),
            "power_mean_w": agg(self.power, statistics.fmean),
            "power_max_w": agg(self.power, max),
            "power_limit_w": self.limit_w,
            "nvml_samples": len(self.clocks),
        }


def time_regimes(
    fn,
    device: str,
    *,
    burst_ms: float = 30.0,
    sustain_ms: float = 800.0,
    rest_s: float = 0.3,
    timer=None,
    sampler=None,
    sleep=time.sleep,
) -> dict:
    """``{"burst": (samples_ms, nvml stats), "sustained": (samples_ms, nvml stats)}`` of
    ``fn``: one warm call, three more for the estimate of a call's time, a rest of ``rest_s``,
    calls worth ``burst_ms`` (at least 3), then calls back to back worth ``sustain_ms`` (at
    least 6) of which the second half is kept."""
    cuda = str(device).startswith("cuda")
    timer = timer or (CudaTimer() if cuda else CpuTimer())
    sampler = sampler or NvmlSampler(device)
    timer.sync()
    timer.time_calls(fn, 1)  # the first call pays for library set-up: not an estimate
    est = max(statistics.median(timer.time_calls(fn, 3)), 1e-3)
    out = {}
    sleep(rest_s)
    with sampler:
        burst = timer.time_calls(fn, max(3, math.ceil(burst_ms / est)))
    out["burst"] = (burst, sampler.stats())
    with sampler:
        sustained = timer.time_calls(fn, max(6, math.ceil(sustain_ms / est)))
    out["sustained"] = (sustained[len(sustained) // 2 :], sampler.stats())
    return out


def measure_ceilings(
    device: str = "cuda",
    n: int | tuple[int, ...] = (4096, 8192, 16384),
    copy_bytes: int = 1 << 30,
    budget_ms: float = 800.0,
    precisions=MATMUL_DTYPES,
    simt_max_n: int = 8192,
    fill: str = "randn",
    burst_ms: float = 30.0,
    rest_s: float = 0.3,
):
    """One row per ceiling and regime (:data:`REGIMES`): ``ceiling`` (``matmul_<prec>``,
    ``matmul_<prec>_n<size>`` per size when several are given, ``copy_d2d``,
    ``copy_h2d_pinned``, ``copy_d2h_pinned``, ``copy_h2d_frame_fp16``), ``regime``, ``value``
    in ``unit`` (TFLOP/s; TOP/s for int8; GB/s; ms for the frame), ``size``, ``median_ms``,
    ``iqr_ms``, ``n_samples``, ``fill`` and ``kernel`` (matmuls only) and what NVML read during
    the timed calls: ``sm_clock_mean_mhz``, ``sm_clock_min_mhz``, ``sm_clock_end_mhz``,
    ``power_mean_w``, ``power_max_w``, ``power_limit_w`` (NaN on a CPU, where only fp32 / fp16 /
    bf16 matmuls run).

    ``n``: the matrix sides (fp32 on the SIMT units only up to ``simt_max_n`` beyond the
    smallest); ``matmul_<prec>`` is the fastest size and implementation (:data:`MATMUL_IMPLS`,
    named in ``kernel``) per regime; ``matmul_int8_cudnn_n<size>`` are cuDNN's int8 rows.
    ``budget_ms``: the sustained run's length; ``burst_ms``: the burst's, after a rest of
    ``rest_s``. ``fill`` (:data:`FILLS`): random operands (the ceiling) or zeros (a power
    diagnostic)."""
    import pandas as pd
    import torch

    if fill not in FILLS:
        raise UserError(f"unknown matmul fill {fill!r}; use one of {', '.join(FILLS)}")
    cuda = str(device).startswith("cuda")
    rows = []
    timing = {"burst_ms": burst_ms, "sustain_ms": budget_ms, "rest_s": rest_s if cuda else 0.0}

    def add(name, regime, samples, stats, value, unit, size, row_fill=None, kernel=None):
        q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [math.nan] * 3
        rows.append(
            {
                "ceiling": name,
                "regime": regime,
                "value": value,
                "unit": unit,
                "size": size,
                "median_ms": statistics.median(samples),
                "iqr_ms": q[2] - q[0],
                "n_samples": len(samples),
                "fill": row_fill,
                "kernel": kernel,
                **stats,
                "sm_clock_end_mhz": sm_clock_mhz(device),
            }
        )

    sizes = (int(n),) if isinstance(n, int) else tuple(int(x) for x in n)
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for prec in precisions:
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            unit = "TOP/s" if prec == "int8" else "TFLOP/s"
            best: dict = {}
            impls = MATMUL_IMPLS[prec]
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
        dst = torch.empty_like(src)
        host = torch.empty(copy_bytes, dtype=torch.uint8).pin_memory()
        frame = torch.empty(3 * 640 * 640, dtype=torch.float16).pin_memory()
        fdst = torch.empty_like(frame, device=device)
        copies = (
            ("copy_d2d", lambda: dst.copy_(src), 2 * copy_bytes, f"{copy_bytes} B"),
            (
                "copy_h2d_pinned",
                lambda: dst.copy_(host, non_blocking=True),
                copy_bytes,
                f"{copy_bytes} B",
            ),
            (
                "copy_d2h_pinned",
                lambda: host.copy_(dst, non_blocking=True),
                copy_bytes,
                f"{copy_bytes} B",
            ),
            (
                "copy_h2d_frame_fp16",
                lambda: fdst.copy_(frame, non_blocking=True),
                None,
                f"{frame.numel() * 2} B (3x640x640 fp16)",
            ),
        )
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

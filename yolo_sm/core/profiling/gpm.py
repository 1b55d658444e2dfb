"""NVML GPU Performance Monitoring (GPM) sampled from a thread: one tidy row per (window, metric),
markers (:meth:`GpmSampler.mark`) as columns. A window spans two distinct snapshots (NVML
refreshes ~every 100 ms; repeats count as ``stale_polls``). Pre-Hopper GPUs fall back to
utilisation rates. Never sample under ncu.
"""

from __future__ import annotations

import math
import os
import threading
import time
import warnings

from yolo_sm.analyse.gpm import FALLBACK_METRICS
from yolo_sm.contract.errors import NotAvailableError, UserError, need

# tidy metric name -> pynvml constant (values in percent, 0-100)
GPM_METRICS = {
    "sm_occupancy_pct": "NVML_GPM_METRIC_SM_OCCUPANCY",
    "sm_util_pct": "NVML_GPM_METRIC_SM_UTIL",
    "tensor_util_pct": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
    "dram_bw_util_pct": "NVML_GPM_METRIC_DRAM_BW_UTIL",
}
#: with ``power=True``, each window also gets the board's power draw (W) when it closes
POWER_METRIC = "power_w"
REQUIRED_COLUMNS = ("t_s", "window_s", "metric", "value", "source")
RESERVED = frozenset(REQUIRED_COLUMNS) | {"straddles_mark"}
PERM_HELP = (
    "NVML may not read the GPU performance counters (Insufficient Permissions): an administrator "
    "must allow profiling counters, e.g. load the nvidia module with "
    "NVreg_RestrictProfilingToAdminUsers=0, or run as root"
)


def _stale(vals: list[float]) -> bool:
    """A GPM window between two identical snapshots: every metric 0 and some undefined (NaN)."""
    finite = [v for v in vals if not math.isnan(v)]
    return len(finite) < len(vals) and all(v == 0 for v in finite)


def nvml_errors(nvml, *names: str) -> tuple:
    """The NVMLError subclasses ``names`` (none: NVMLError) this NVML module has (``except ()``
    matches nothing)."""
    names = names or ("NVMLError",)
    return tuple(c for n in names if isinstance(c := getattr(nvml, n, None), type))


def import_pynvml():
    """pynvml, or NotAvailableError saying what to install."""
    advice = "reading NVML needs pynvml, which is not installed: pip install nvidia-ml-py"
    return need("pynvml", advice + " (the gpu extra)")


class GpmSampler:
    """Sample NVML GPU ``index`` at ``hz`` from a thread (with ``power``, also
    :data:`POWER_METRIC`); ``mode``: gpm / nvml_util; ``nvml`` replaces pynvml in tests."""

    def __init__(self, hz: float = 20.0, index: int = 0, nvml=None, power: bool = False):
        if not (isinstance(hz, int | float) and 0 < hz <= 1000):
            raise UserError(f"hz must be a number in (0, 1000], not {hz!r}")
        self.hz, self.index, self._nvml, self.power = float(hz), int(index), nvml, bool(power)
        self.mode: str | None = None
        self.rows: list[dict] = []
        self.sample_cost_s: list[float] = []
        self.stale_polls = self._mark_gen = 0
        self.error: BaseException | None = None
        self._labels: dict = {}
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None
        self._samples: list = []
        self._handle, self._inited = None, False
        self._t0 = self._tick = 0.0

    def mark(self, **labels) -> None:
        """Merge markers (``key=None`` clears) into every row from the next window on; a window
        during which mark() ran has ``straddles_mark=True``."""
        bad = sorted(RESERVED & labels.keys())
        if bad:
            raise ValueError(f"marker names {bad} are reserved column names")
        for k, v in labels.items():
            if v is not None and not isinstance(v, str | int | float | bool):
                raise ValueError(f"marker {k}={v!r} must be a str, number, bool or None")
        with self._lock:
            self._labels = {**self._labels, **labels}
            self._mark_gen += 1

    def __enter__(self) -> GpmSampler:
        if self.mode is not None or self._stop.is_set():
            raise UserError("a GpmSampler samples once: make a new one for the next run")
        inj = os.environ.get("CUDA_INJECTION64_PATH", "")
        if "nsight-compute" in inj.lower():
            raise UserError(
                "this process runs under Nsight Compute, which uses the same performance "
                "counters as GPM: sample GPM in a separate run"
            )
        nvml = self._nvml = self._nvml if self._nvml is not None else import_pynvml()
        try:
            nvml.nvmlInit()
        except nvml_errors(nvml, "NVMLError") as e:
            raise NotAvailableError(
                f"NVML could not start ({e}): is an NVIDIA driver installed and a GPU visible?"
            ) from None
        self._inited = True
        try:
            self._handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
            self.mode = self._start_gpm() if self._gpm_supported() else "nvml_util"
            if self.mode == "nvml_util":
                warnings.warn(
                    f"GPU {self.index} has no NVML GPM (it needs Hopper or newer and a recent "
                    "driver): sampling nvmlDeviceGetUtilizationRates instead (gpu_util_pct, "
                    "mem_util_pct, source 'nvml_util', averaged by the driver over 1/6 to 1 s), "
                    "which cannot show SM occupancy",
                    stacklevel=2,
                )
                self._t0 = self._tick = time.perf_counter()
                self._read_util()  # fail now, not in the thread, if unsupported
            if self.power:
                self.power = self._power_supported()
        except BaseException as e:
            self._close()
            if isinstance(e, nvml_errors(nvml, "NVMLError_NoPermission")):
                raise NotAvailableError(PERM_HELP) from None
            if isinstance(e, nvml_errors(nvml, "NVMLError")):
                raise NotAvailableError(f"NVML cannot sample GPU {self.index}: {e}") from None
            raise
        self._thread = threading.Thread(
            target=self._run, args=(self._mark_gen,), name="GpmSampler", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None and self.error is not None:
            e = self.error
            if isinstance(e, nvml_errors(self._nvml, "NVMLError_NoPermission")):
                raise NotAvailableError(PERM_HELP) from e
            raise RuntimeError(f"GPM sampling stopped early: {e!r}") from e

    def stop(self) -> None:
        """Stop and join the thread, free the GPM samples, shut NVML down (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._close()

    def _close(self) -> None:
        nvml, samples, self._samples = self._nvml, self._samples, []
        for s in samples:
            try:
                nvml.nvmlGpmSampleFree(s)
            except Exception:  # noqa: BLE001 - freeing must not hide the real error
                pass
        self._handle = None
        if self._inited:
            self._inited = False
            try:
                nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass

    def _gpm_supported(self) -> bool:
        nvml = self._nvml
        if not hasattr(nvml, "nvmlGpmQueryDeviceSupport"):  # pynvml older than GPM
            return False
        try:
            return bool(nvml.nvmlGpmQueryDeviceSupport(self._handle).isSupportedDevice)
        except nvml_errors(nvml, "NVMLError_NotSupported", "NVMLError_FunctionNotFound"):
            return False

    def _start_gpm(self) -> str:
        nvml = self._nvml
        self._samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        q = self._query = nvml.c_nvmlGpmMetricsGet_t()
        q.version = nvml.NVML_GPM_METRICS_GET_VERSION
        q.numMetrics = len(GPM_METRICS)
        for i, const in enumerate(GPM_METRICS.values()):
            q.metrics[i].metricId = getattr(nvml, const)
        try:
            self._t0 = self._tick = self._take(self._samples[0])
        except nvml_errors(nvml, "NVMLError_NotSupported"):  # e.g. MIG or vGPU without GPM
            for s in self._samples:
                nvml.nvmlGpmSampleFree(s)
            self._samples = []
            return "nvml_util"
        return "gpm"

    def _take(self, sample) -> float:
        t = time.perf_counter()
        self._nvml.nvmlGpmSampleGet(self._handle, sample)
        return (t + time.perf_counter()) / 2

    def _read_gpm(self) -> tuple[float, list[float]]:
        prev, cur = self._samples
        t = self._take(cur)
        q = self._query
        q.sample1, q.sample2 = prev, cur
        self._nvml.nvmlGpmMetricsGet(q)
        ok = getattr(self._nvml, "NVML_SUCCESS", 0)
        vals = [
            float(m.value) if m.nvmlReturn == ok else math.nan
            for m in q.metrics[: len(GPM_METRICS)]
        ]
        if _stale(vals):  # same snapshot as the window opener: keep the opener, re-poll later
            return t, None
        self._samples = [cur, prev]  # this sample opens the next window
        return t, vals

    def _power_supported(self) -> bool:
        try:
            self._nvml.nvmlDeviceGetPowerUsage(self._handle)
        except nvml_errors(self._nvml, "NVMLError_NotSupported", "NVMLError_FunctionNotFound"):
            warnings.warn(
                f"GPU {self.index} reports no power draw (nvmlDeviceGetPowerUsage): the "
                "timeline has no power_w rows",
                stacklevel=3,
            )
            return False
        return True

    def _read_power(self) -> float:
        """Board power draw in watts (NVML reports milliwatts; NaN when a read fails)."""
        try:
            return self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
        except nvml_errors(self._nvml, "NVMLError"):
            return math.nan

    def _read_util(self) -> tuple[float, list[float]]:
        t = time.perf_counter()
        u = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
        return (t + time.perf_counter()) / 2, [float(u.gpu), float(u.memory)]

    def _run(self, gen: int) -> None:
        gpm_mode = self.mode == "gpm"
        names = list(GPM_METRICS) if gpm_mode else list(FALLBACK_METRICS)
        if self.power:
            names.append(POWER_METRIC)
        read, source = (self._read_gpm, "gpm") if gpm_mode else (self._read_util, "nvml_util")
        period = 1.0 / self.hz
        due = self._tick + period
        try:
            while not self._stop.wait(max(0.0, due - time.perf_counter())):
                c0 = time.perf_counter()
                due = due + period if due + period > c0 else c0 + period  # no burst after a stall
                t, vals = read()
                if vals is None:
                    self.stale_polls += 1
                    self.sample_cost_s.append(time.perf_counter() - c0)
                    continue
                if self.power:
                    vals = [*vals, self._read_power()]
                with self._lock:
                    fixed = {"t_s": t - self._t0, "window_s": t - self._tick, "source": source}
                    fixed["straddles_mark"], gen = gen != self._mark_gen, self._mark_gen
                    for name, v in zip(names, vals, strict=True):
                        self.rows.append({**fixed, "metric": name, "value": v, **self._labels})
                self._tick = t
                self.sample_cost_s.append(time.perf_counter() - c0)
        except BaseException as e:  # noqa: BLE001 - reported by __exit__
            self.error = e

    @property
    def achieved_hz(self) -> float:
        """Windows per second actually sampled (nan before two samples)."""
        with self._lock:
            ts = sorted({r["t_s"] for r in self.rows})
        return len(ts) / ts[-1] if ts and ts[-1] > 0 else math.nan

    def info(self) -> dict:
        """Mode, rates and sampling cost, for provenance."""
        cost = sorted(self.sample_cost_s)
        return {
            "mode": self.mode,
            "gpu_index": self.index,
            "hz": self.hz,
            "achieved_hz": self.achieved_hz,
            "polls": len(cost),
            "stale_polls": self.stale_polls,
            "sample_cost_median_s": cost[len(cost) // 2] if cost else None,
            "sample_cost_max_s": cost[-1] if cost else None,
        }

    def take_rows(self) -> list[dict]:
        """The rows since the last call, removed from :attr:`rows` (keeps a long-running
        reader's memory flat)."""
        with self._lock:
            rows, self.rows = self.rows, []
            del self.sample_cost_s[:-1000]  # the latest polls' costs
        return rows

    def to_frame(self):
        """One row per (window, metric): t_s, window_s, metric, value, source, straddles_mark,
        then one column per marker key."""
        import pandas as pd

        with self._lock:
            rows = list(self.rows)
        cols = [*REQUIRED_COLUMNS, "straddles_mark"]
        extra = list(dict.fromkeys(k for r in rows for k in r if k not in RESERVED))
        return pd.DataFrame(rows, columns=cols + extra)

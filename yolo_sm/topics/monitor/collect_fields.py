"""What the live monitor reads and how dcgm-exporter names it: the fields (:data:`FIELDS`), the
series' labels, the NVML reads behind the device fields and labels, the mean of GPM windows
behind the profiling fields, and whether Nsight Compute runs (:func:`ncu_running`). Used by
:mod:`yolo_sm.topics.monitor.collect`."""

from __future__ import annotations

import math
import os
from pathlib import Path

from yolo_sm.contract.errors import NotAvailableError
from yolo_sm.contract.workload import LABELS

#: dcgm-exporter field -> (unit, help); the PROF fields from NVML GPM, the DEV fields from NVML
FIELDS = {
    "DCGM_FI_PROF_SM_OCCUPANCY": ("ratio", "Ratio of warps resident on an SM to the maximum, "
                                  "over all SMs (NVML GPM SM occupancy)."),
    "DCGM_FI_PROF_SM_ACTIVE": ("ratio", "Ratio of cycles an SM has at least 1 warp assigned, "
                               "over all SMs (NVML GPM SM utilisation)."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("ratio", "Ratio of cycles any tensor pipe is active "
                                        "(NVML GPM any-tensor utilisation)."),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("ratio", "Ratio of cycles the device memory interface is "
                                 "active sending or receiving data (NVML GPM DRAM bandwidth "
                                 "utilisation)."),
    "DCGM_FI_DEV_GPU_UTIL": ("%", "GPU utilization (in %): time a kernel ran (NVML)."),
    "DCGM_FI_DEV_FB_USED": ("MiB", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_SM_CLOCK": ("MHz", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_POWER_USAGE": ("W", "Power draw (in W)."),
}  # fmt: skip
#: the PROF fields and the GPM metric (percent, collect.profiling.gpm.GPM_METRICS) behind each
PROF_FIELDS = {
    "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy_pct",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_util_pct",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_util_pct",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_bw_util_pct",
}
#: the labels dcgm-exporter puts on every series, in its order
DEVICE_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
#: every series' labels: the device's, then the workload's
SERIES_LABELS = (*DEVICE_LABELS, *LABELS)
#: the gauge that reads 1 while Nsight Compute runs and GPM is not sampled
PAUSED_METRIC = "yolo_sm_monitor_gpm_paused"
#: how often the GPM sampler polls (GPM refreshes about every 100 ms: collect.profiling.gpm)
GPM_HZ = 20.0
MIN_INTERVAL_S, MAX_INTERVAL_S = 0.2, 3600.0


def import_pynvml():
    """pynvml, or NotAvailableError saying what to install."""
    try:
        import pynvml
    except ImportError:
        raise NotAvailableError(
            "the monitor reads NVML through pynvml, which is not installed: pip install "
            "nvidia-ml-py (the gpu extra)"
        ) from None
    return pynvml


def ncu_running(proc: str | os.PathLike = "/proc") -> bool:
    """Whether an Nsight Compute command line (``ncu``) runs on this machine (its processes
    as /proc lists them)."""

    def comm(pid: str) -> str:
        try:
            return (Path(proc) / pid / "comm").read_text().strip()
        except OSError:
            return ""

    try:
        return any(comm(p) == "ncu" for p in os.listdir(proc) if p.isdigit())
    except OSError:
        return False


def as_text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def nvml_errors(nvml) -> tuple:
    err = getattr(nvml, "NVMLError", None)
    return (err,) if isinstance(err, type) else ()


def device_labels(nvml, handle, index: int, hostname: str) -> dict:
    """dcgm-exporter's labels of the GPU: gpu (NVML index), UUID, pci_bus_id, device
    (``nvidia<minor>``), modelName, Hostname."""

    def read(fn, default=""):
        try:
            return fn()
        except Exception:  # noqa: BLE001 - a label NVML cannot read stays empty
            return default

    minor = read(lambda: nvml.nvmlDeviceGetMinorNumber(handle), index)
    return {
        "gpu": str(index),
        "UUID": as_text(read(lambda: nvml.nvmlDeviceGetUUID(handle))),
        "pci_bus_id": as_text(read(lambda: nvml.nvmlDeviceGetPciInfo(handle).busId)),
        "device": f"nvidia{minor}",
        "modelName": as_text(read(lambda: nvml.nvmlDeviceGetName(handle))),
        "Hostname": hostname,
    }


def read_device(nvml, handle) -> dict[str, float]:
    """The DEV fields now, in dcgm-exporter's units; a field NVML does not support is left out."""
    reads = {
        "DCGM_FI_DEV_GPU_UTIL": lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        "DCGM_FI_DEV_FB_USED": lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20,
        "DCGM_FI_DEV_SM_CLOCK": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
        "DCGM_FI_DEV_POWER_USAGE": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,  # mW
    }
    out = {}
    for name, fn in reads.items():
        try:
            out[name] = float(fn())
        except nvml_errors(nvml):
            continue
    return out


def prof_means(rows: list[dict]) -> dict[str, float]:
    """The PROF fields (ratios) from GPM rows (``metric``, ``value`` in %, ``window_s``): per
    metric the mean of the finite values weighted by window length; a metric with no finite
    window is left out."""
    acc: dict[str, list[float]] = {}
    for r in rows:
        v, w = r.get("value"), r.get("window_s") or 0.0
        if v is None or not math.isfinite(v) or w <= 0:
            continue
        a = acc.setdefault(r["metric"], [0.0, 0.0])
        a[0] += v * w
        a[1] += w
    return {
        field: acc[metric][0] / acc[metric][1] / 100.0
        for field, metric in PROF_FIELDS.items()
        if metric in acc and acc[metric][1] > 0
    }

"""Live GPU monitoring as dcgm-exporter shows it: NVML GPM and device fields of one GPU
(:data:`FIELDS`: ratios 0-1, %, MiB, MHz, W), sampled from a thread and labelled with the workload
beside it. GPM shares its counters with Nsight Compute: the monitor refuses to start beside ``ncu``
and pauses GPM while one runs."""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
import threading
import time
import warnings
from pathlib import Path

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.schema import SCHEMAS
from yolo_sm.contract.scrub import record_host, user_command
from yolo_sm.contract.workload import LABELS, current, read_status
from yolo_sm.core.devices import as_text
from yolo_sm.core.profiling.gpm import GpmSampler, import_pynvml, nvml_errors
from yolo_sm.core.provenance import dist_version

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
#: the gauge that reads 1 while Nsight Compute runs and GPM is not sampled
PAUSED_METRIC = "yolo_sm_monitor_gpm_paused"
#: how often the GPM sampler polls (GPM refreshes about every 100 ms: collect.profiling.gpm)
GPM_HZ = 20.0
MIN_INTERVAL_S, MAX_INTERVAL_S = 0.2, 3600.0


def ncu_running(proc: str | os.PathLike = "/proc") -> bool:
    """Whether an Nsight Compute (``ncu``) process runs on this machine (per /proc)."""

    def comm(pid: str) -> str:
        try:
            return (Path(proc) / pid / "comm").read_text().strip()
        except OSError:
            return ""

    try:
        return any(comm(p) == "ncu" for p in os.listdir(proc) if p.isdigit())
    except OSError:
        return False


def device_labels(nvml, handle, index: int, hostname: str) -> dict:
    """dcgm-exporter's labels of the GPU (:data:`DEVICE_LABELS`)."""

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
    """The PROF fields (ratios): per GPM metric the window-weighted mean of the finite values (%), /
    100."""
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


NCU_RUNS = (
    "Nsight Compute (ncu) runs on this machine and uses the performance counters GPM "
    "reads: start the monitor after it has finished"
)


class Monitor:
    """Samples GPU ``index`` (NVML's numbering) every ``interval`` s from a thread while entered;
    ``nvml`` and ``ncu_check`` replace pynvml and the ncu check (tests)."""

    def __init__(
        self,
        index: int = 0,
        interval: float = 1.0,
        *,
        nvml=None,
        status_file: str | os.PathLike | None = None,
        hostname: str | None = None,
        gpm_hz: float = GPM_HZ,
        ncu_check=None,
    ):
        if not (isinstance(interval, int | float) and MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S):
            raise UserError(
                f"interval must be {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} s, not {interval!r}"
            )
        if not isinstance(index, int) or index < 0:
            raise UserError(f"device must be an NVML index (0, 1, ...), not {index!r}")
        self.index, self.interval, self.gpm_hz = index, float(interval), float(gpm_hz)
        self.status_file = status_file or os.environ.get("YOLO_SM_STATUS_FILE") or None
        self.hostname = hostname if hostname is not None else socket.gethostname()
        self._nvml = nvml
        self._ncu_check = ncu_check or (lambda: ncu_running())
        self.labels: dict = {}
        self.paused = False
        self.ticks = 0
        self.error: BaseException | None = None
        self._marks: dict = {}
        self._snapshot: dict = {"t_s": None, "values": {}, "labels": {}}
        self._rows: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler: GpmSampler | None = None
        self._handle = None
        self._inited = False
        self._t0 = 0.0
        self._prov: dict = {}

    # ---- labels --------------------------------------------------------------------------
    def mark(self, **labels) -> None:
        """Workload labels set in this process (None clears one); while any is set they replace the
        status file's."""
        unknown = sorted(set(labels) - set(LABELS))
        if unknown:
            raise ValueError(f"unknown workload label(s) {unknown}; known: {', '.join(LABELS)}")
        with self._lock:
            for k, v in labels.items():
                if v is None:
                    self._marks.pop(k, None)
                else:
                    self._marks[k] = v

    def workload(self) -> dict:
        """The workload labels now: :meth:`mark`'s, else this process's published ones, else the
        status file's."""
        with self._lock:
            marks = dict(self._marks)
        return marks or current() or read_status(self.status_file)

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> Monitor:
        if self._thread is not None or self._stop.is_set():
            raise UserError("a Monitor runs once: make a new one for the next run")
        if self._ncu_check():
            raise UserError(NCU_RUNS)
        nvml = self._nvml = self._nvml if self._nvml is not None else import_pynvml()
        try:
            nvml.nvmlInit()
        except nvml_errors(nvml) as e:
            raise NotAvailableError(
                f"NVML could not start ({e}): is an NVIDIA driver installed and a GPU visible?"
            ) from None
        self._inited = True
        try:
            try:
                self._handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
            except nvml_errors(nvml) as e:
                raise UserError(f"NVML has no GPU {self.index} ({e}): see nvidia-smi -L") from None
            self.labels = device_labels(nvml, self._handle, self.index, self.hostname)
            self._prov = self._read_provenance()
            self._sampler = self._start_gpm()
        except BaseException:
            self._close()
            raise
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="Monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sampling (idempotent); what was sampled stays in :meth:`to_frame`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._close()

    def _close(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        if self._inited:
            self._inited = False
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass

    def _start_gpm(self) -> GpmSampler:
        """A running GPM sampler of the GPU; NotAvailableError where the GPU has no GPM."""
        s = GpmSampler(hz=self.gpm_hz, index=self.index, nvml=self._nvml)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback's warning: refused below instead
            s.__enter__()
        if s.mode != "gpm":
            s.stop()
            raise NotAvailableError(
                f"GPU {self.index} ({self.labels.get('modelName') or 'unknown'}) has no NVML GPM "
                "(it needs a Hopper or newer GPU, a recent driver and no MIG or vGPU), so the "
                "profiling fields cannot be read"
            )
        return s

    # ---- sampling ------------------------------------------------------------------------
    def _run(self) -> None:
        due = self._t0 + self.interval
        try:
            while not self._stop.wait(max(0.0, due - time.perf_counter())):
                due = max(due + self.interval, time.perf_counter())
                self.tick()
        except BaseException as e:  # noqa: BLE001 - kept for the caller (error)
            self.error = e

    def _gpm_rows(self) -> list[dict]:
        """The GPM windows since the last tick; the sampler stops while ncu runs and restarts
        after."""
        if self._ncu_check():
            if self._sampler is not None:
                self._sampler.stop()
                self._sampler = None
            self.paused = True
            return []
        self.paused = False
        s = self._sampler
        if s is not None and s.error is not None:
            s.stop()
            s = self._sampler = None
        if s is None:
            with contextlib.suppress(UserError):
                self._sampler = self._start_gpm()
            return []
        return s.take_rows()

    def tick(self) -> dict:
        """Take one sample now: PROF fields of the GPM windows since the last tick, DEV fields,
        workload labels."""
        t = time.perf_counter()
        values = {**prof_means(self._gpm_rows()), **read_device(self._nvml, self._handle)}
        work = self.workload()
        with self._lock:
            last = self._snapshot["t_s"]
            t_s = t - self._t0
            window = t_s - last if last is not None else t_s
            self._snapshot = {"t_s": t_s, "values": values, "labels": work, "paused": self.paused}
            labels = {k: work.get(k) for k in LABELS}
            labels["batch"] = _batch(labels["batch"])
            labels = {k: "" if v is None else v for k, v in labels.items()}
            gpu = {"gpu_index": self.index, "gpu_uuid": self.labels.get("UUID", "")}
            self._rows += [{"t_s": t_s, "window_s": window, "metric": name, "value": v,
                            "unit": FIELDS[name][0], **gpu, **labels}
                           for name, v in values.items()]  # fmt: skip
            self.ticks += 1
        return self._snapshot

    def snapshot(self) -> dict:
        """The latest sample: ``t_s``, ``values`` (field -> value), ``labels``, ``paused``."""
        with self._lock:
            return dict(self._snapshot)

    def series(self) -> list[tuple[str, dict, float]]:
        """(name, labels, value) of every series ``/metrics`` shows now, :data:`PAUSED_METRIC`
        included."""
        snap = self.snapshot()
        work = snap["labels"]
        labels = {**self.labels, **{k: str(work.get(k, "")) for k in LABELS}}
        out = [(name, labels, v) for name, v in snap["values"].items()]
        out.append((PAUSED_METRIC, dict(self.labels), 1.0 if snap.get("paused") else 0.0))
        return out

    def to_frame(self):
        """Every sample so far, one row per (sample, field) (kind ``monitor``)."""
        import pandas as pd

        with self._lock:
            rows = list(self._rows)
        df = pd.DataFrame(rows, columns=list(SCHEMAS["monitor"]))
        df["batch"] = pd.to_numeric(df["batch"], errors="coerce").astype("Float64")
        return df

    def provenance(self) -> dict:
        """The GPU and run as NVML told when the monitor started (no CUDA context is made)."""
        return dict(self._prov)

    def _read_provenance(self) -> dict:
        import datetime as dt

        nvml, h = self._nvml, self._handle

        def read(fn):
            try:
                v = fn()
                return as_text(v) if isinstance(v, bytes | str) else v
            except Exception:  # noqa: BLE001
                return None

        prov = {
            "device": f"nvml:{self.index}",
            "nvml_index": self.index,
            "gpu_name": self.labels.get("modelName") or None,
            "gpu_uuid": self.labels.get("UUID") or None,
            "pci_bus_id": self.labels.get("pci_bus_id") or None,
            "driver": read(lambda: nvml.nvmlSystemGetDriverVersion()),
            "sm_clock_max_mhz": read(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)),
            "python": sys.version.split()[0],
            "yolo_sm": dist_version("yolo_sm"),
            "date_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": user_command(sys.argv) if sys.argv and sys.argv[0] else None,
        }
        if record_host():
            prov["hostname"] = self.hostname
        return prov


def _batch(v):
    try:
        return int(v) if v not in (None, "") else None
    except (TypeError, ValueError):
        return None

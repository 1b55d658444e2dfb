"""Live GPU monitoring as a dcgm-exporter deployment shows it: NVML GPM and NVML device fields
of one GPU, sampled every ``interval`` seconds from a thread, named as dcgm-exporter names them
(:data:`FIELDS`: GPM profiling fields as ratios 0-1, utilisation %, MiB, MHz, W) and labelled
with the workload running beside it (:meth:`Monitor.mark`, else this process's bench or sweep,
else the status file another yolo_sm command writes). GPM shares its counters with Nsight
Compute: the monitor refuses to start beside ``ncu`` and pauses GPM while one runs.

    with Monitor(index=0, interval=1.0) as mon:
        serve(mon, port=9400)                       # /metrics for Prometheus
        mon.mark(workload="bench", engine="eager/fp16/nhwc", batch=16)
    df = mon.to_frame()                             # one row per sample and field
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import warnings

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.schema import SCHEMAS
from yolo_sm.contract.scrub import record_host, user_command
from yolo_sm.contract.workload import LABELS, current, read_status
from yolo_sm.core.profiling.gpm import GpmSampler
from yolo_sm.topics.monitor.collect_fields import (  # noqa: F401 (re-exported: the monitor's vocabulary)
    DEVICE_LABELS,
    FIELDS,
    GPM_HZ,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    PAUSED_METRIC,
    PROF_FIELDS,
    SERIES_LABELS,
    as_text,
    device_labels,
    import_pynvml,
    ncu_running,
    nvml_errors,
    prof_means,
    read_device,
)

NCU_RUNS = (
    "Nsight Compute (ncu) runs on this machine and uses the performance counters GPM "
    "reads: start the monitor after it has finished"
)


class Monitor:
    """Samples GPU ``index`` (NVML's numbering, dcgm-exporter's ``gpu`` label) every
    ``interval`` seconds from a thread while entered. ``nvml`` replaces pynvml and
    ``ncu_check`` the Nsight Compute check (tests); ``status_file`` defaults to
    ``YOLO_SM_STATUS_FILE``; ``hostname`` to this host's name (the Hostname label, never
    recorded in the table). :meth:`snapshot` is the latest sample, :meth:`to_frame` every
    sample."""

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
        """Workload labels set in this process (names of ``contract.workload.LABELS``; None
        clears one); while any is set they replace the status file's."""
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
        """The workload labels now: :meth:`mark`'s, else those a workload in this process
        published (``contract.workload.publish``), else the status file's."""
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
        """The GPM windows since the last tick; stops the sampler while ncu runs and starts a
        new one (or again after a sampler error) once it may."""
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
            try:
                self._sampler = self._start_gpm()
            except UserError:
                return []
            return []
        return s.take_rows()

    def tick(self) -> dict:
        """Take one sample now (the thread calls this every interval): the PROF fields from
        the GPM windows since the last tick, the DEV fields, the workload labels."""
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
        """The latest sample: ``t_s``, ``values`` (field -> value), ``labels`` (the workload's),
        ``paused``."""
        with self._lock:
            return dict(self._snapshot)

    def series(self) -> list[tuple[str, dict, float]]:
        """(name, labels, value) of every series ``/metrics`` shows now: each field with the
        device's and the workload's labels, and :data:`PAUSED_METRIC`."""
        snap = self.snapshot()
        work = snap["labels"]
        labels = {**self.labels, **{k: str(work.get(k, "")) for k in LABELS}}
        out = [(name, labels, v) for name, v in snap["values"].items()]
        out.append((PAUSED_METRIC, dict(self.labels), 1.0 if snap.get("paused") else 0.0))
        return out

    def to_frame(self):
        """Every sample so far, one row per (sample, field) (kind ``monitor``,
        ``contract.schema``)."""
        import pandas as pd

        with self._lock:
            rows = list(self._rows)
        df = pd.DataFrame(rows, columns=list(SCHEMAS["monitor"]))
        df["batch"] = pd.to_numeric(df["batch"], errors="coerce").astype("Float64")
        return df

    def provenance(self) -> dict:
        """What the record says about the GPU and the run, read from NVML when the monitor
        started (no CUDA context is made)."""
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
            "yolo_sm": _version(),
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


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("yolo_sm")
    except PackageNotFoundError:
        return None

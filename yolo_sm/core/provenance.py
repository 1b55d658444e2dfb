"""Provenance: what hardware and software produced a number (the TREx ``metadata.json`` idea)."""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata as _md
import json
import os
import platform
import socket
import sys
from pathlib import Path

from yolo_sm.contract.scrub import record_host, user_command
from yolo_sm.contract.store import write_text_atomic
from yolo_sm.core.devices import identify, nvml_handle, nvml_index


def dist_version(dist: str) -> str | None:
    """The installed version of the distribution ``dist``, None where it is not installed."""
    try:
        return _md.version(dist)
    except _md.PackageNotFoundError:
        return None


def _device_index(device: str) -> int:
    import torch

    return torch.device(device).index or 0 if str(device).startswith("cuda") else 0


def gpu_name(device: str) -> str | None:
    """The model name of CUDA device ``device`` (``NVIDIA H200``), None without one."""
    if not str(device).startswith("cuda"):
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    try:
        return torch.cuda.get_device_name(_device_index(device))
    except (RuntimeError, AssertionError):  # no driver or device: torch raises these
        return None


def gpu_clash(seen, device: str | None, name: str | None) -> str | None:
    """How a run on ``device`` (GPU ``name``) differs from the GPU models ``seen``, or None."""
    seen = [g for g in seen if g]
    if not device or not seen or (name is None and str(device).startswith("cuda")):
        return None
    if all(g == name for g in seen):
        return None
    return f"this GPU is {name}" if name else f"this run is on {device}"


def sm_clock_mhz(device: str = "cuda") -> float | None:
    """Current SM clock in MHz (NVML), or None on CPU / without NVML."""
    if not str(device).startswith("cuda"):
        return None
    nvml, h = nvml_handle(nvml_index(device))
    if h is None:
        return None
    try:
        return float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001
        return None


@functools.cache
def source_digest() -> str:
    """12 hex digits of the SHA-256 of the package's ``.py`` files: a table's code without git."""
    import hashlib

    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


@functools.cache
def cpu_model() -> str | None:
    """The host CPU's model name (eager small-batch timings move with it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def collect(device: str = "cpu") -> dict:
    """Hardware and software facts of a result (host name only with ``--record-host``); None
    where missing."""
    import torch

    info: dict = {
        "device": str(device),
        **dict.fromkeys(("gpu_name", "sm_count", "compute_capability", "gpu_memory_bytes")),
        **identify(device),  # which physical GPU (core.devices)
        **dict.fromkeys(("sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "driver")),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "ultralytics": dist_version("ultralytics-opencv-headless") or dist_version("ultralytics"),
        "onnxruntime": dist_version("onnxruntime") or dist_version("onnxruntime-gpu"),
        "tensorrt": dist_version("tensorrt"),
        "yolo_sm": dist_version("yolo_sm"),
        "yolo_sm_source": source_digest(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "date_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": user_command(sys.argv) if sys.argv and sys.argv[0] else None,
    }
    if record_host():
        info["hostname"] = socket.gethostname()
    if str(device).startswith("cuda") and torch.cuda.is_available():
        idx = _device_index(device)
        props = torch.cuda.get_device_properties(idx)
        info.update(
            gpu_name=props.name,
            sm_count=props.multi_processor_count,
            compute_capability=f"{props.major}.{props.minor}",
            gpu_memory_bytes=props.total_memory,
        )
        nvml, h = nvml_handle(nvml_index(device))
        if h is not None:
            for key, fn in (
                ("driver", lambda: nvml.nvmlSystemGetDriverVersion()),
                ("sm_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
                ("sm_clock_max_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)),
                ("mem_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM)),
            ):
                try:
                    value = fn()
                    info[key] = value.decode() if isinstance(value, bytes) else value
                except Exception:  # noqa: BLE001
                    pass
    return info


def stamp(prov: dict | str) -> dict:
    """``prov`` (or :func:`collect` of a device name) as ``prov_*`` columns, dicts left out."""
    prov = collect(prov) if isinstance(prov, str) else prov
    return {f"prov_{k}": v for k, v in prov.items() if not isinstance(v, dict)}


def write_sidecar(artefact: str | os.PathLike, prov: dict, extra: dict | None = None) -> Path:
    """Write ``<artefact>.metadata.json`` beside an artefact, atomically."""
    path = Path(f"{artefact}.metadata.json")
    write_text_atomic(path, json.dumps({**prov, **(extra or {})}, indent=2, default=str))
    return path


def read_sidecar(artefact: str | os.PathLike) -> dict | None:
    """The provenance :func:`write_sidecar` wrote beside ``artefact``; None where it is absent
    or unreadable."""
    try:
        meta = json.loads(Path(f"{artefact}.metadata.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None

"""What this machine can do: hardware, software versions, and which profilers are usable."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.core.devices import nvml_handle
from yolo_sm.core.provenance import collect

NCU_CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")


def find_ncu() -> str | None:
    """Path of Nsight Compute's ``ncu`` (``YOLO_SM_NCU`` overrides), or None."""
    env = os.environ.get("YOLO_SM_NCU")
    if env:
        return env if Path(env).exists() else None
    return shutil.which("ncu") or next((c for c in NCU_CANDIDATES if Path(c).exists()), None)


def gpm_supported(index: int = 0) -> bool | None:
    """NVML GPM support on GPU ``index`` (True/False), or None without pynvml/NVML."""
    nvml, h = nvml_handle(index)
    try:
        return None if h is None else bool(nvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)
    except Exception:  # noqa: BLE001
        return None


def check_device(name: str, what: str = "--device", gpu_only: str = "") -> None:
    """NotAvailableError where torch lacks device ``name``; ``gpu_only``: a command refusing cpu."""
    name = str(name)
    if gpu_only and not name.startswith("cuda"):
        raise UserError(f"{gpu_only} runs on a GPU only: use --device cuda on a machine with one")
    if not name.startswith("cuda"):
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not count:
        advice = f"{gpu_only} runs on a GPU only: run it on a machine with one" if gpu_only else ""
        raise NotAvailableError(
            f"{what} {name} was requested but torch sees no CUDA GPU here; "
            + (advice or "use --device cpu")
        )
    index = int(name.partition(":")[2] or 0)
    if index >= count:
        raise NotAvailableError(
            f"{what} {name} does not exist: torch sees {count} GPU(s) (cuda:0 to cuda:{count - 1})"
        )


def check_backends(backends) -> None:
    """NotAvailableError where a backend's optional package (named as it) is not installed."""
    for b in dict.fromkeys(str(x).split(":")[0].lower() for x in backends):
        if b in ("tensorrt", "onnxruntime") and importlib.util.find_spec(b) is None:
            raise NotAvailableError(
                f"backend {b} was requested but {b} is not installed here; leave it out or "
                "install it"
            )


def describe(device: str = "cuda") -> dict:
    """Provenance facts plus one line per backend and profiler: usable here or why not."""
    import torch

    cuda = torch.cuda.is_available()
    info = collect(device if cuda else "cpu")
    info["cuda_available"] = cuda

    def has(mod):
        return importlib.util.find_spec(mod) is not None

    ort = "not installed"
    if has("onnxruntime"):
        import onnxruntime

        ort = ", ".join(onnxruntime.get_available_providers())
    ncu = find_ncu()
    info.update(
        {
            "backend_eager": "yes",
            "backend_cudagraph": "yes" if cuda else "no (needs a CUDA GPU)",
            "backend_compile": "yes" if has("triton") or not cuda else "no triton: CPU only",
            "backend_onnxruntime": ort,
            "backend_tensorrt": "yes" if has("tensorrt") else "no (TensorRT not installed)",
            "profiler_kineto": "yes (CUPTI)" if cuda else "CPU events only (no GPU)",
            "profiler_ncu": ncu or "no (ncu not found: install Nsight Compute or set YOLO_SM_NCU)",
            "profiler_nvml_gpm": {
                True: "yes",
                False: "no (GPU lacks GPM: NVML utilisation fallback)",
                None: "no (pynvml or NVML missing)",
            }[gpm_supported() if cuda else None],
            "profiler_nvtx": "yes" if has("nvtx") else "torch.cuda.nvtx only (pip install nvtx)",
        }
    )
    return info

"""Which physical GPU a torch device is: its NVML index and UUID, matched by UUID (else PCI bus
id), never the torch index (``CUDA_VISIBLE_DEVICES`` renumbers torch's devices, not NVML's)."""

from __future__ import annotations

import functools
import os


def cuda_index(device: str = "cuda") -> int:
    """The torch index of a ``cuda`` / ``cuda:N`` device (``cuda`` is the current device)."""
    import torch

    d = torch.device(device)
    return d.index if d.index is not None else torch.cuda.current_device()


def identify(device: str = "cuda") -> dict:
    """``nvml_index``, ``gpu_uuid``, ``pci_bus_id`` and ``nvml_match`` (how, or why not) of a CUDA
    device; all None on a CPU."""
    import torch

    none = dict.fromkeys(("nvml_index", "gpu_uuid", "pci_bus_id", "nvml_match"))
    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return none
    props = torch.cuda.get_device_properties(cuda_index(device))
    return {**none, **_match(_uuid(getattr(props, "uuid", None)), _bus(props))}


def _uuid(value) -> str | None:
    if value is None:
        return None
    text = str(value).strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def _bus(props) -> str | None:
    """``domain:bus:device`` (lowercase hex) of torch's device properties, if any."""
    try:
        return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}"
    except (AttributeError, TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=16)
def _match(uuid: str | None, bus: str | None) -> dict:
    unmatched = {"gpu_uuid": uuid and "GPU-" + uuid, "pci_bus_id": bus}
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
    except Exception:  # noqa: BLE001 - no NVML: the GPU is not identified
        return {**unmatched, "nvml_match": "no NVML"}
    for i in range(n):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        nv_uuid = _uuid(as_text(pynvml.nvmlDeviceGetUUID(h)))
        nv_bus = _nvml_bus(as_text(pynvml.nvmlDeviceGetPciInfo(h).busId))
        how = "uuid" if uuid and nv_uuid == uuid else "pci_bus_id" if bus and nv_bus == bus else ""
        if how:
            return {
                "nvml_index": i,
                "gpu_uuid": "GPU-" + nv_uuid,
                "pci_bus_id": nv_bus,
                "nvml_match": how,
            }
    return {**unmatched, "nvml_match": "no match"}


def as_text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _nvml_bus(text: str) -> str:
    """NVML's ``00000000:19:00.0`` -> ``0000:19:00`` (the form :func:`_bus` builds)."""
    parts = text.lower().split(":")
    if len(parts) != 3:
        return text.lower()
    return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2].split('.')[0]}"


def nvml_handle(index: int):
    """(pynvml, the handle of NVML's GPU ``index``), or Nones without pynvml or a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - no NVML is a normal state on CPU machines
        return None, None


def nvml_index(device: str = "cuda") -> int:
    """The NVML index of ``device`` (:func:`identify`), else its torch index."""
    found = identify(device)["nvml_index"]
    return cuda_index(device) if found is None else int(found)


def visible_index(local: int = 0, nvml=None) -> int:
    """NVML's index of CUDA's GPU ``local``: ``CUDA_VISIBLE_DEVICES``'s ``local``-th entry (a
    number, or a UUID looked up through ``nvml``), else ``local``."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    visible = [v for v in visible if v]
    if local >= len(visible):
        return local
    entry = visible[local]
    if entry.isdigit():
        return int(entry)
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
        return int(nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByUUID(entry)))
    except Exception:  # noqa: BLE001 - no NVML or an unknown UUID: CUDA's own number
        return local

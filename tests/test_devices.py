"""Which GPU a run uses: torch's device matched to NVML by UUID or PCI bus id (a fake NVML
here: the GPU test checks the real one), and the manifest's machine entry."""

import sys
import types

import pytest

from yolo_sm.contract.manifest import machine_of
from yolo_sm.core import devices


@pytest.fixture
def fake_nvml(monkeypatch):
    gpus = [("GPU-aaaa", "00000000:19:00.0"), ("GPU-bbbb", "00000000:3B:00.0")]
    nv = types.ModuleType("pynvml")
    nv.nvmlInit = lambda: None
    nv.nvmlDeviceGetCount = lambda: len(gpus)
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetUUID = lambda h: gpus[h][0].encode()
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=gpus[h][1].encode())
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    devices._match.cache_clear()
    yield
    devices._match.cache_clear()


def test_gpu_matched_by_uuid_not_by_torch_index(fake_nvml):
    # torch sees one GPU (CUDA_VISIBLE_DEVICES=1): its UUID is NVML's second device
    got = devices._match("bbbb", None)
    assert got["nvml_index"] == 1 and got["gpu_uuid"] == "GPU-bbbb" and got["nvml_match"] == "uuid"


def test_gpu_matched_by_pci_bus_without_uuid(fake_nvml):
    got = devices._match(None, "0000:3b:00")
    assert got["nvml_index"] == 1 and got["nvml_match"] == "pci_bus_id"


def test_an_unknown_gpu_is_not_assumed(fake_nvml):
    got = devices._match("cccc", "0000:99:00")
    assert got["nvml_match"] == "no match" and "nvml_index" not in got


def test_bus_ids_of_torch_and_nvml_read_alike():
    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0)
    assert devices._bus(props) == devices._nvml_bus("00000000:3B:00.0") == "0000:3b:00"
    assert devices._uuid("GPU-ABCD") == devices._uuid("abcd") == "abcd"


def test_cpu_device_identifies_nothing():
    assert set(devices.identify("cpu").values()) == {None}


def test_manifest_machine_is_the_gpu_datasets_machine():
    datasets = {
        "sweep": {"provenance": {"gpu_name": "H200", "gpu_uuid": "GPU-aaaa", "cpu_model": "X"}},
        "trace": {"provenance": {"gpu_name": "H200", "gpu_uuid": ["GPU-aaaa", "GPU-bbbb"]}},
        "tables": {"provenance": {"cpu_model": "Y"}},  # counted on another host
    }
    m = machine_of(datasets)
    assert m["gpu_uuid"] == ["GPU-aaaa", "GPU-bbbb"] and m["cpu_model"] == ["X"]
    assert machine_of({"t": {"provenance": {"cpu_model": "Y"}}}) == {"cpu_model": ["Y"]}

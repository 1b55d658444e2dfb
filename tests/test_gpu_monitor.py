"""The live monitor on a real GPU (marker ``gpu``; ``pytest -m gpu`` on a CUDA machine): NVML
GPM and NVML give every dcgm-exporter field as a finite value in its unit while a matmul loop
keeps the SMs and tensor pipes busy, and /metrics shows them."""

import math
import time

import pytest

pytestmark = pytest.mark.gpu

INTERVAL = 0.5


def _busy(seconds: float) -> None:
    import torch

    x = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        for _ in range(10):
            x @ x
        torch.cuda.synchronize()


@pytest.fixture(scope="module")
def sampled():
    from yolo_sm.core.devices import nvml_index
    from yolo_sm.topics.monitor.collect import Monitor

    mon = Monitor(index=nvml_index("cuda"), interval=INTERVAL)
    scraped = None
    with mon:
        mon.mark(workload="test", engine="matmul/fp16")
        _busy(3.0)
        try:
            from yolo_sm.topics.monitor.collect_exporter import serve

            server = serve(mon, port=0, address="127.0.0.1")
        except ImportError:  # NotAvailableError: prometheus_client is not installed here
            server = None
        if server is not None:
            import urllib.request

            scraped = urllib.request.urlopen(server.url, timeout=5).read().decode()
            server.close()
    return mon, mon.to_frame(), scraped


def test_every_field_is_finite_in_its_unit(sampled):
    from yolo_sm.topics.monitor.collect import FIELDS

    mon, df, _ = sampled
    assert mon.error is None, repr(mon.error)
    assert set(df.metric) == set(FIELDS), set(FIELDS) - set(df.metric)
    assert df.value.map(math.isfinite).all()
    top = df.groupby("metric").value.max()
    for name in FIELDS:
        if name.startswith("DCGM_FI_PROF"):
            assert 0 <= df[df.metric == name].value.min() and top[name] <= 1.0 + 1e-6, name
    assert top["DCGM_FI_PROF_SM_ACTIVE"] > 0.5  # an 8192^2 fp16 matmul loop fills the SMs
    assert top["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] > 0.05
    assert top["DCGM_FI_DEV_FB_USED"] > 128  # the operands alone are 128 MiB
    assert top["DCGM_FI_DEV_SM_CLOCK"] > 300 and top["DCGM_FI_DEV_POWER_USAGE"] > 20
    assert 0 <= top["DCGM_FI_DEV_GPU_UTIL"] <= 100
    assert mon.labels["UUID"].startswith("GPU-") and mon.labels["modelName"]
    assert (df.engine == "matmul/fp16").all()


def test_metrics_endpoint_shows_the_fields(sampled):
    from yolo_sm.topics.monitor.collect import FIELDS

    _, _, body = sampled
    if body is None:
        pytest.skip("prometheus_client is not installed here")
    from prometheus_client.parser import text_string_to_metric_families

    names = {f.name for f in text_string_to_metric_families(body)}
    assert set(FIELDS) <= names

"""A :class:`~yolo_sm.topics.monitor.collect.Monitor` on a Prometheus ``/metrics`` endpoint (gauges
named as dcgm-exporter's fields, the latest sample's labels only), and its samples written as a
dataset."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from yolo_sm.contract.errors import UserError, need
from yolo_sm.contract.manifest import register
from yolo_sm.contract.store import write_atomic
from yolo_sm.topics.monitor.collect import FIELDS, Monitor

PAUSED_HELP = "1 while Nsight Compute runs on this machine and GPM is not sampled, else 0."


def import_prometheus_client():
    """prometheus_client, or NotAvailableError saying what to install."""
    return need(
        "prometheus_client",
        "the /metrics endpoint needs prometheus_client, which is not installed: pip install "
        "prometheus_client (the monitor extra: pip install -e '.[monitor]')",
    )


class MonitorCollector:
    """A prometheus_client collector yielding a monitor's latest sample as gauges."""

    def __init__(self, monitor: Monitor):
        self.monitor = monitor

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        families = {}  # every series of a name has the same label keys, in the same order
        for name, labels, value in self.monitor.series():
            if name not in families:
                helptext = FIELDS[name][1] if name in FIELDS else PAUSED_HELP
                families[name] = GaugeMetricFamily(name, helptext, labels=list(labels))
            families[name].add_metric(list(labels.values()), value)
        yield from families.values()


@dataclass
class Server:
    """A running ``/metrics`` endpoint; :meth:`close` stops it."""

    httpd: object
    thread: object
    address: str
    port: int

    @property
    def url(self) -> str:
        """``http://ADDRESS:PORT/metrics``, or for a wildcard address ``every address of this host,
        port PORT``."""
        host = self.httpd.server_address[0] if self.httpd is not None else self.address
        if host in ("", "0.0.0.0", "::"):
            return f"every address of this host, port {self.port} (/metrics)"
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def serve(monitor: Monitor, port: int = 9400, address: str = "127.0.0.1") -> Server:
    """Serve ``monitor``'s series at ``http://address:port/metrics`` from a thread (port 0: a free
    one)."""
    pc = import_prometheus_client()
    registry = pc.CollectorRegistry(auto_describe=False)  # only this monitor's series
    registry.register(MonitorCollector(monitor))
    try:
        httpd, thread = pc.start_http_server(int(port), addr=address, registry=registry)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UserError(
                f"port {port} is in use on {address or 'every address'}: give another --port"
            ) from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise UserError(f"port {port} needs privileges here: give one above 1023") from None
        raise UserError(f"cannot listen on {address}:{port} ({e.strerror or e})") from None
    return Server(httpd, thread, address, httpd.server_port)


def record_frame(monitor: Monitor):
    """The monitor's samples with its provenance as ``prov_*`` columns."""
    df = monitor.to_frame()
    for k, v in monitor.provenance().items():
        if v is not None:
            df[f"prov_{k}"] = str(v) if not isinstance(v, int | float) else v
    return df


def write_record(
    monitor: Monitor,
    path: str | os.PathLike,
    dataset: str | None = None,
    description: str = "",
    command: str = "",
) -> Path:
    """Write the samples to parquet ``path`` (kind ``monitor``), registered as ``dataset`` when
    given."""
    df = record_frame(monitor)
    if df.empty:
        raise UserError(
            f"the monitor took no sample (it ran under one interval of {monitor.interval:g} s): "
            f"nothing is written to {path}"
        )
    path = Path(path)
    write_atomic(df, path, {"monitor": {"interval_s": monitor.interval, "ticks": monitor.ticks}})
    if dataset:
        register(
            path.parent,
            dataset,
            path.name,
            "monitor",
            description
            or "Live monitor samples (dcgm-exporter's fields from NVML GPM and NVML) of one GPU, "
            "labelled with the yolo_sm workload that ran beside it",
            command or str(monitor.provenance().get("command") or ""),
        )
    return path

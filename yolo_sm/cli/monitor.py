"""``yolo-sm monitor``: NVML GPM and fields on a Prometheus ``/metrics`` endpoint (dcgm-exporter
names, labelled with the workload); ``--record`` writes the series (kind ``monitor``)."""

from __future__ import annotations

import signal
import threading

from yolo_sm.cli.common import log
from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import STEP_NAME
from yolo_sm.contract.workload import STATUS_ENV

MAX_DURATION_S = 7 * 86400.0


def add_parser(sub) -> None:
    m = sub.add_parser("monitor", help="serve a GPU's GPM and NVML fields on /metrics")
    arg = m.add_argument
    arg("--port", default="9400", help="TCP port of /metrics (dcgm-exporter's 9400)")
    where = "address to listen on (127.0.0.1: this host; 0.0.0.0: all, unauthenticated)"
    arg("--host", "--address", dest="address", default="127.0.0.1", help=where)
    arg("--interval", default="1.0", help="seconds between samples (0.2 to 3600)")
    arg("--device", default="0", help="NVML index of the GPU (nvidia-smi's numbering)")
    arg("--duration", help="stop after this many seconds (default: ^C)")
    arg("--record", help="also write the samples to this .parquet file")
    arg("--dataset", help="register the --record table under this name in its folder's manifest")
    arg("--status-file", help=f"the workload status file to label samples from (${STATUS_ENV})")
    m.set_defaults(run=run)


def run(args) -> int:
    from yolo_sm.topics.monitor.collect import MAX_INTERVAL_S, MIN_INTERVAL_S, Monitor
    from yolo_sm.topics.monitor.collect_exporter import (
        import_prometheus_client,
        serve,
        write_record,
    )

    port = values.whole(args.port, "--port", lo=0, hi=65535)
    address = values.text(args.address, "--host")
    interval = values.number(
        args.interval, "--interval", lo=MIN_INTERVAL_S, hi=MAX_INTERVAL_S, unit="s"
    )
    index = values.whole(args.device, "--device", lo=0, hi=1023)
    duration = None
    if args.duration is not None:
        duration = values.number(args.duration, "--duration", above=0, hi=MAX_DURATION_S, unit="s")
    record = None
    if args.record is not None:
        if not str(args.record).endswith(".parquet"):
            raise UserError(f"--record must end in .parquet, got {args.record}")
        record = values.output_path(args.record, "--record")
    if args.dataset is not None:
        if record is None:
            raise UserError("--dataset names the --record table: give --record too")
        if not STEP_NAME.fullmatch(str(args.dataset)):
            raise UserError(f"--dataset {args.dataset!r} must be letters, digits, '_', '.' or '-'")
    import_prometheus_client()

    mon = Monitor(index=index, interval=interval, status_file=args.status_file)
    server = serve(mon, port=port, address=address)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())  # `kill` ends it cleanly
    try:
        with mon:
            log.info(
                f"monitor: GPU {index} ({mon.labels.get('modelName')}) every {interval:g} s "
                f"at {server.url}" + (f" for {duration:g} s" if duration else " until ^C")
            )
            try:
                stop.wait(duration)
            except KeyboardInterrupt:
                log.info("monitor: interrupted")
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()
    if mon.error is not None:
        log.warning(f"monitor: sampling stopped early: {mon.error!r}")
    print(f"monitor: {mon.ticks} samples of GPU {index}")
    if record is not None:
        path = write_record(mon, record, dataset=args.dataset)
        print(
            f"wrote {path} ({len(mon.to_frame())} rows)"
            + (f", registered as {args.dataset}" if args.dataset else "")
        )
    return 0

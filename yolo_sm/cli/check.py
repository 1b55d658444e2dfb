"""``yolo-sm check``: a hardware-metric regression gate between a baseline and a candidate table
(:mod:`yolo_sm.analyse.regress`); exit 0 when no shared point regressed, 1 when one did."""

from __future__ import annotations

import json
from pathlib import Path

from yolo_sm.analyse import regress
from yolo_sm.analyse.hostbound import TOLERANCE
from yolo_sm.cli.common import comma_list, print_table
from yolo_sm.contract import datasets, values
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.store import read_frame, write_text_atomic

#: largest --tolerance (a fraction: 10 is a tenfold change)
MAX_TOLERANCE = 10.0
CPU = "prov_cpu_model"
#: exit code when a point regressed past the tolerance (2: a user error)
REGRESSED = 1


def add_parser(sub) -> None:
    pct = f"{TOLERANCE * 100:g} %%"
    c = sub.add_parser(
        "check",
        help=f"compare a table's points with a baseline's; exit {REGRESSED} when one regressed",
        description="Match the candidate's points to the baseline's on their key columns and "
        "compare img/s, latency p50/p99, time-weighted achieved occupancy, peak memory and "
        "delivered TFLOP/s (those both carry). Host-bound points are compared as ratios to "
        "the same model's CUDA-graph replay measured in the same table. Exit code: 0 when no "
        f"point regressed past the tolerance, {REGRESSED} when one did, 2 on bad input.",
    )
    c.add_argument(
        "--baseline", required=True, help="a dataset (e.g. h200/sweep_fp16_nhwc) or a parquet file"
    )
    c.add_argument(
        "--candidate", required=True, help="a parquet file (e.g. from yolo-sm remeasure --out)"
    )
    c.add_argument(
        "--metrics",
        default=None,
        help=f"comma list among {', '.join(regress.METRICS)} (default: those both tables carry)",
    )
    c.add_argument(
        "--tolerance",
        default=TOLERANCE,
        help=f"allowed change as a fraction, 0 to {MAX_TOLERANCE:g} (default {pct})",
    )
    c.add_argument("--json", default=None, help="write the verdict and every comparison here")
    c.set_defaults(run=run)


def load(what: str):
    """A table named by a parquet path (when it exists or ends in ``.parquet``) or a dataset."""
    if what.endswith(".parquet") or Path(what).exists():
        return read_frame(what)
    return datasets.load(what)


def _first(df, col: str) -> str:
    v = df[col].dropna() if col in df else ()
    return str(v.iloc[0]) if len(v) else "unknown"


def machine(df) -> str:
    """The machine a table was measured on (provenance): the GPU (or cpu) and the host's CPU."""
    gpu = _first(df, "prov_gpu_name")
    dev = gpu if gpu not in ("unknown", "", "None") else _first(df, "prov_device")
    return f"{dev} (host CPU {_first(df, CPU)})"


def run(args) -> int:
    args.tolerance = values.number(args.tolerance, "--tolerance", lo=0, hi=MAX_TOLERANCE)
    if args.json is not None:
        values.output_path(args.json, "--json")
    baseline, candidate = load(args.baseline), load(args.candidate)
    metrics = comma_list(args.metrics) or None
    cmp = regress.compare(baseline, candidate, metrics=metrics, tolerance=args.tolerance)
    machines = machine(baseline), machine(candidate)
    print(f"baseline measured on {machines[0]}; candidate on {machines[1]}")
    host = cmp["host_bound"].astype(bool)
    if "device" in cmp:
        host |= cmp["device"].astype(str).eq("cpu")
    if host.any() and _first(baseline, CPU) != _first(candidate, CPU):
        raise UserError(
            f"{int(host.sum())} comparison(s) are of host-bound or CPU points, whose time is the "
            f"host's, and the baseline's host ({_first(baseline, CPU)}) is not the candidate's "
            f"({_first(candidate, CPU)}): measure both on one host to gate them"
        )
    v = regress.verdict(cmp, args.tolerance)
    shown = [c for c in ("width", "precision", "layout", "backend", "batch", "variant") if c in cmp]
    shown += ["metric", "baseline", "candidate", "basis", "change", "gated", "regressed"]
    print_table(cmp[shown])
    print(
        f"{v['regressed']} of {v['rows']} comparisons over {v['points']} points regressed past "
        f"{args.tolerance * 100:g} % (a host-bound point's time is reported, not gated; "
        f"{v['undecided']} host-bound point(s) without GPU busy time or launches in both tables "
        "not decided)"
    )
    if args.json:
        write_text_atomic(args.json, json.dumps(regress.to_json(cmp, args.tolerance), indent=1))
    return 0 if v["passed"] else REGRESSED

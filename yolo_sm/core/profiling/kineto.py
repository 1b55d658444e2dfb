"""PyTorch profiler (Kineto): capture a gzipped Chrome trace, and load its GPU kernels (launch
config, Kineto's occupancy estimate, our theoretical occupancy, waves, class) attributed to the
enclosing layer ranges (:mod:`.nvtx`).
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import os
from pathlib import Path

from yolo_sm.analyse.kernels import classify
from yolo_sm.analyse.occupancy import theoretical_occupancy, waves
from yolo_sm.analyse.weighting import weighted_mean
from yolo_sm.contract.errors import UserError, refuse_malformed
from yolo_sm.contract.store import atomic_file
from yolo_sm.core import provenance as prov
from yolo_sm.core import timing
from yolo_sm.core.profiling.nvtx import FORWARD_RANGE, forward_range, layer_ranges, parse_range

KERNEL_COLUMNS = tuple(
    "kernel_name start_us duration_us grid block grid_size block_size registers_per_thread "
    "shared_mem_per_block_bytes est_occupancy_pct theoretical_occupancy_pct limiter waves "
    "iteration layer module_type stage kernel_class stream correlation".split()
)


def capture(
    fn,
    path: str | os.PathLike,
    *,
    model=None,
    iters: int = 3,
    warmup: int = 2,
    device: str = "cuda",
    provenance: dict | None = None,
) -> Path:
    """Profile ``iters`` calls of ``fn()`` after ``warmup`` into ``path`` (``.json.gz``) plus
    ``<path>.metadata.json``; with ``model``, each layer in a named range. The pass ends the
    device's warm state (:func:`timing.cool`)."""
    import contextlib
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    path = Path(path)
    if not path.name.endswith(".json.gz"):
        raise UserError(f"trace path must end in .json.gz, got {path.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    on_gpu = str(device).startswith("cuda")
    timing.cool(device)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    ranges = layer_ranges(model) if model is not None else contextlib.nullcontext()
    with profile(activities=acts) as prof, ranges, torch.no_grad():
        for _ in range(iters):
            with forward_range():
                fn()
            sync()
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        with open(raw, "rb") as src, atomic_file(path, "wb") as fh:
            with gzip.GzipFile(path.name, "wb", 6, fh) as dst:
                dst.write(src.read())
    prov.write_sidecar(path, provenance or prov.collect(device), {"iters": iters, "warmup": warmup})
    return path


#: largest trace read, uncompressed (bytes): a 1000-forward trace of a large model is far less
MAX_TRACE_BYTES = 256 << 20


def read_trace(path: str | os.PathLike) -> dict:
    """The trace JSON (plain or gzipped, at most :data:`MAX_TRACE_BYTES` uncompressed); a
    truncated, corrupt, oversized or misshapen file is a clear UserError."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read(MAX_TRACE_BYTES + 1)
        if len(raw) > MAX_TRACE_BYTES:
            raise UserError(
                f"{path} holds more than {MAX_TRACE_BYTES >> 20} MiB of trace: not a trace "
                "this package wrote"
            )
        trace = json.loads(raw)
    except UserError:
        raise
    except (OSError, EOFError, ValueError, RecursionError, gzip.BadGzipFile) as e:
        reason = type(e).__name__
        raise UserError(
            f"{path} is not a readable trace (truncated or corrupt: {reason})"
        ) from None
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise UserError(f"{path} is not a Chrome trace (no traceEvents list)")
    return trace


_malformed = refuse_malformed("a trace", "an event has a missing or malformed field")


@_malformed
def load_kernels(
    path: str | os.PathLike, compute_capability: str | None = None, sm_count: int | None = None
):
    """One row per GPU kernel (:data:`KERNEL_COLUMNS`) in start order: ``iteration`` from the
    ``profiled_forward`` ranges, ``layer`` from the innermost enclosing layer range (empty
    under CUDA graphs and compile)."""
    import pandas as pd

    trace = read_trace(path)
    events = trace["traceEvents"]
    props = {int(p.get("id", 0)): p for p in trace.get("deviceProperties", [])}
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    launches = {
        e["args"].get("correlation"): e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e
    }
    spans = _annotation_spans(events)
    rows = []
    for k in kernels:
        a = k.get("args", {})
        corr = a.get("correlation")
        launch = launches.get(corr)
        where = {}
        if launch is not None:
            where = _enclosing(spans, launch.get("pid"), launch.get("tid"), float(launch["ts"]))
        grid, block = list(a.get("grid", [0, 0, 0])), list(a.get("block", [0, 0, 0]))
        rows.append(
            {
                "kernel_name": k.get("name", ""),
                "start_us": float(k["ts"]),
                "duration_us": float(k.get("dur", 0.0)),
                "grid": "x".join(map(str, grid)),
                "block": "x".join(map(str, block)),
                "grid_size": math.prod(grid),
                "block_size": math.prod(block),
                "registers_per_thread": a.get("registers per thread"),
                "shared_mem_per_block_bytes": a.get("shared memory"),
                "est_occupancy_pct": a.get("est. achieved occupancy %"),
                "device": a.get("device", 0),
                "stream": a.get("stream"),
                "correlation": corr,
                **where,
            }
        )
    df = pd.DataFrame(rows, columns=[*KERNEL_COLUMNS, "device"])
    if df.empty:
        return df
    df = df.sort_values("start_us", ignore_index=True)
    df["kernel_class"] = df.kernel_name.map(classify)
    for col in ("layer", "module_type", "stage"):
        df[col] = df[col].fillna("")
    _add_occupancy(df, props, compute_capability, sm_count)
    return df


def _annotation_spans(events):
    """CPU-side ranges (record_function / user annotations) per (pid, tid): the forward
    ranges and the layer ranges, each as :func:`_ranges`."""
    spans: dict[tuple, tuple[list, list]] = {}
    for e in events:
        if e.get("cat") not in ("user_annotation", "cpu_op") or e.get("ph") != "X":
            continue
        name = e.get("name", "")
        if name != FORWARD_RANGE and parse_range(name) is None:
            continue
        start = float(e["ts"])
        forwards, layers = spans.setdefault((e.get("pid"), e.get("tid")), ([], []))
        span = (start, start + float(e.get("dur", 0)), name)
        (forwards if name == FORWARD_RANGE else layers).append(span)
    return {k: (_ranges(f), _ranges(la)) for k, (f, la) in spans.items()}


def _ranges(spans):
    """Ranges sorted by start, their starts, and for each the index of the nearest earlier
    range that ends later (-1 for none): :func:`_last_enclosing` walks that chain."""
    spans.sort()
    back, stack = [], []
    for i, s in enumerate(spans):
        while stack and spans[stack[-1]][1] <= s[1]:
            stack.pop()
        back.append(stack[-1] if stack else -1)
        stack.append(i)
    return spans, [s[0] for s in spans], back


def _last_enclosing(ranges, ts) -> int:
    """Index of the latest-starting range holding ``ts`` (-1 for none), walking ``back`` links."""
    spans, starts, back = ranges
    i = bisect.bisect_right(starts, ts) - 1
    while i >= 0 and spans[i][1] < ts:
        i = back[i]
    return i


def _enclosing(spans, pid, tid, ts):
    entry = spans.get((pid, tid))
    if entry is None:
        return {}
    forwards, layers = entry
    out = {}
    i = _last_enclosing(forwards, ts)
    if i >= 0:
        out["iteration"] = i
    i = _last_enclosing(layers, ts)
    if i >= 0:
        out.update(parse_range(layers[0][i][2]))
    return out


def _add_occupancy(df, props, cc, sm_count):
    theo, lim, wav = [], [], []
    for r in df.itertuples():
        p = props.get(int(r.device or 0), {})
        c = cc or (f"{p['computeMajor']}.{p['computeMinor']}" if "computeMajor" in p else None)
        n = sm_count or p.get("numSms")
        try:
            launch = (r.block_size, r.registers_per_thread or 0, r.shared_mem_per_block_bytes or 0)
            res = theoretical_occupancy(c, *map(int, launch))
            theo.append(res.occupancy_pct)
            lim.append(res.limiter)
            per_sm = res.active_blocks_per_sm
            wav.append(waves(int(r.grid_size), per_sm, int(n)) if n and per_sm else math.nan)
        except (ValueError, TypeError, KeyError):
            theo.append(math.nan)
            lim.append("")
            wav.append(math.nan)
    df["theoretical_occupancy_pct"], df["limiter"], df["waves"] = theo, lim, wav


def occupancy_summary(fn, *, device: str = "cuda", iters: int = 3, warmup: int = 1) -> dict:
    """Short Kineto pass over ``iters`` calls: kernels and kernel µs per forward, time-weighted
    estimated and theoretical occupancy (%); on a CPU 0 and NaN."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        kw = {"iters": iters, "warmup": warmup, "device": device}
        path = capture(fn, Path(tmp) / "occupancy.json.gz", **kw, provenance={"pass": "summary"})
        df = load_kernels(path)
    if df.empty:
        nan = math.nan
        keys = ("kineto_kernel_us", "est_occupancy_tw_pct", "theoretical_occupancy_tw_pct")
        return {"kineto_kernels_per_forward": 0.0, **dict.fromkeys(keys, nan)}
    import pandas as pd

    w = df["duration_us"]
    est = pd.to_numeric(df["est_occupancy_pct"], errors="coerce")
    theo = pd.to_numeric(df["theoretical_occupancy_pct"], errors="coerce")
    return {
        "kineto_kernels_per_forward": len(df) / iters,
        "kineto_kernel_us": float(w.sum()) / iters,
        "est_occupancy_tw_pct": weighted_mean(est, w),
        "theoretical_occupancy_tw_pct": weighted_mean(theo, w),
    }

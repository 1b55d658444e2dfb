"""Short PyTorch-profiler captures of engines running side by side (yolo_sm.topics.sharing.collect),
each kernel attributed to the engine whose replay launched it."""

from __future__ import annotations

import bisect
from pathlib import Path

from yolo_sm.analyse.kernels import classify
from yolo_sm.core.profiling.kineto import read_trace
from yolo_sm.topics.sharing.collect_run import RANGE, run_engines


def engine_kernels(path, names, stream_engines=None):
    """Kernel rows of a trace taken by :func:`run_engines` with ``ranges=names``: ``engine``
    (the range around the launch whose correlation the kernel carries), ``kernel_name``,
    ``kernel_class``, ``start_us``, ``duration_us``, ``stream``; and per engine the replays the
    capture holds. A kernel whose launch is not found belongs to the one engine of a capture
    of one, else to the engine ``stream_engines`` (stream -> engine, learnt from the captures
    of each engine alone) names for its stream; other kernels are left out."""
    import pandas as pd

    events = read_trace(path)["traceEvents"]
    wanted = {RANGE + str(n): str(n) for n in names}
    spans: dict = {}
    replays = {str(n): 0 for n in names}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op"):
            name = wanted.get(e.get("name", ""))
            if name is None:
                continue
            replays[name] += 1
            ts = float(e["ts"])
            spans.setdefault((e.get("pid"), e.get("tid")), []).append(
                (ts, ts + float(e.get("dur", 0)), name)
            )
    for v in spans.values():
        v.sort()
    starts = {k: [s[0] for s in v] for k, v in spans.items()}
    launches = {
        e["args"].get("correlation"): e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e
    }
    rows = []
    for k in events:
        if k.get("cat") != "kernel" or k.get("ph") != "X":
            continue
        args = k.get("args", {})
        engine = _launching_engine(launches.get(args.get("correlation")), spans, starts)
        if engine is None:
            engine = names[0] if len(names) == 1 else (stream_engines or {}).get(args.get("stream"))
        if engine is None:
            continue
        rows.append(
            {
                "engine": str(engine),
                "kernel_name": k.get("name", ""),
                "start_us": float(k["ts"]),
                "duration_us": float(k.get("dur", 0.0)),
                "stream": k.get("args", {}).get("stream"),
            }
        )
    df = pd.DataFrame(rows, columns=["engine", "kernel_name", "start_us", "duration_us", "stream"])
    df["kernel_class"] = df.kernel_name.map(classify)
    return df, replays


def _launching_engine(launch, spans, starts):
    """The engine whose range encloses ``launch`` on its thread (None: no launch or range)."""
    if launch is None:
        return None
    key = (launch.get("pid"), launch.get("tid"))
    ts = float(launch["ts"])
    i = bisect.bisect_right(starts.get(key, []), ts) - 1
    if i < 0 or ts > spans[key][i][1]:
        return None
    return spans[key][i][2]


def trace_run(engines, names, streams, seconds, depth, folder, stream_engines=None):
    """A short PyTorch-profiler capture of :func:`run_engines` (kernels only, the trace file
    removed after reading): :func:`engine_kernels` of it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_engines(engines, seconds, depth, streams, ranges=names)
    path = Path(folder) / f"trace-{'-'.join(names)}.json"
    prof.export_chrome_trace(str(path))
    try:
        return engine_kernels(path, names, stream_engines)
    finally:
        path.unlink(missing_ok=True)

"""Engines side by side: each on its own CUDA stream timed by CUDA events per batch (profiler
captures attribute each kernel to its engine), or one per process, started at a barrier."""

from __future__ import annotations

import bisect
import multiprocessing
import threading
import time
from collections import deque
from pathlib import Path

from yolo_sm.analyse.kernels import classify
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.models import build
from yolo_sm.core.profiling.kineto import read_trace

#: record_function range around each replay of a traced run: RANGE + engine name
RANGE = "sharing_engine_"
#: how long the parent waits at a barrier or for a result of the two processes (s)
PROCESS_TIMEOUT_S = 180.0
#: pause of the launch loop while every engine has ``depth`` batches in flight (s): far below a
#: batch's GPU time, so the next batch is always queued before the current one ends
POLL_S = 50e-6


def run_engines(engines, seconds: float, depth: int = 2, streams=None, ranges=None):
    """Replay each ``(engine, input)`` for ``seconds``, each on its own stream with up to
    ``depth`` batches in flight: per engine ``(starts_ms, ends_ms)`` on one clock. ``ranges``
    names a ``record_function`` range per engine; on a CPU the engines take turns."""
    device = str(engines[0][0].config.device)
    if not device.startswith("cuda"):
        return _run_cpu(engines, seconds, ranges)
    import torch

    streams = streams or [torch.cuda.Stream(device=device) for _ in engines]
    marks = _range_factory(ranges, len(engines))
    t0 = torch.cuda.Event(enable_timing=True)  # the clock's zero, before any batch
    torch.cuda.synchronize(device)
    t0.record()
    inflight = [deque() for _ in engines]
    events = [[] for _ in engines]
    t_end = time.perf_counter() + float(seconds)
    while time.perf_counter() < t_end:
        launched = False
        for i, (eng, x) in enumerate(engines):
            q = inflight[i]
            while q and q[0][1].query():
                q.popleft()
            if len(q) >= depth:
                continue
            launched = True
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(streams[i]), marks(i):
                start.record()
                eng(x)
                end.record()
            q.append((start, end))
            events[i].append((start, end))
        if not launched:  # every queue full: let the GPU work (and a trace stay small)
            time.sleep(POLL_S)
    torch.cuda.synchronize(device)
    return [
        ([t0.elapsed_time(s) for s, _ in ev], [t0.elapsed_time(e) for _, e in ev]) for ev in events
    ]


def _range_factory(ranges, n):
    import contextlib

    if not ranges:
        return lambda i: contextlib.nullcontext()
    from torch.profiler import record_function

    names = [RANGE + str(r) for r in ranges]
    assert len(names) == n
    return lambda i: record_function(names[i])


def _run_cpu(engines, seconds, ranges=None):
    marks = _range_factory(ranges, len(engines))
    t0 = time.perf_counter()
    out = [([], []) for _ in engines]
    t_end = t0 + float(seconds)
    while time.perf_counter() < t_end:
        for i, (eng, x) in enumerate(engines):
            with marks(i):
                s = time.perf_counter()
                eng(x)
                e = time.perf_counter()
            out[i][0].append((s - t0) * 1e3)
            out[i][1].append((e - t0) * 1e3)
    return out


def engine_kernels(path, names, stream_engines=None):
    """Kernel rows of a :func:`run_engines` trace, each with the engine whose range launched it
    (else the capture's one engine, else ``stream_engines[stream]``), and replays per engine."""
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
    """:func:`engine_kernels` of a short PyTorch-profiler capture of :func:`run_engines`."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_engines(engines, seconds, depth, streams, ranges=names)
    path = Path(folder) / f"trace-{'-'.join(names)}.json"
    prof.export_chrome_trace(str(path))
    try:
        return engine_kernels(path, names, stream_engines)
    finally:
        path.unlink(missing_ok=True)


def build_side(model, side, opts: dict):
    """(engine, its input) of one side of a pair, warmed up (cuDNN tuned, graph captured)."""
    kw = {k: opts[k] for k in ("backend", "precision", "layout", "imgsz", "device")}
    eng = build_engine(model, EngineConfig(batch=side[1], **kw))
    x = eng._input if eng._input is not None else eng.make_input(0)
    for _ in range(3):
        eng(x)
    if opts["device"].startswith("cuda"):
        import torch

        torch.cuda.synchronize(opts["device"])
    return eng, x


def process_worker(slot, sides, opts, barrier, results, timeout_s):
    """One process of the two-process mode: per pair, build, meet the other at the barrier,
    run and report ``("ok", slot, pair_index, (starts, ends))``; an error breaks the barrier."""
    try:
        import torch

        torch.set_num_threads(2)  # the parent times its own engines meanwhile
        models = [build(opts["family"], side[0]) for side in sides]
        barrier.wait(3 * timeout_s)  # the parent's own runs are over (they take longest)
        for i, side in enumerate(sides):
            eng, x = build_side(models[i], side, opts)
            barrier.wait(timeout_s)  # both built: start together
            (run,) = run_engines([(eng, x)], opts["seconds"], opts["depth"])
            results.put(("ok", slot, i, run))
            barrier.wait(timeout_s)  # both done before either builds the next
            eng.close()
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        results.put(("error", slot, -1, f"{type(e).__name__}: {e}"))
        barrier.abort()


class Processes:
    """The parent's side of the two-process mode (spawned at the start, so that their imports
    and CPU model builds overlap the parent's own runs)."""

    def __init__(self, pairs, opts):
        ctx = multiprocessing.get_context("spawn")
        self.barrier = ctx.Barrier(3)
        self.results = ctx.Queue()
        self.timeout = PROCESS_TIMEOUT_S
        common = (opts, self.barrier, self.results, self.timeout)
        self.procs = [
            ctx.Process(target=process_worker, args=(slot, [p[k] for p in pairs], *common),
                        name=f"sharing-{slot}", daemon=True)
            for k, slot in enumerate(("a", "b"))
        ]  # fmt: skip
        for p in self.procs:
            p.start()

    def _failed(self) -> str:
        msgs = []
        while True:
            try:
                item = self.results.get(timeout=1.0)
            except Exception:  # noqa: BLE001 - queue.Empty
                break
            if item[0] == "error":
                msgs.append(f"process {item[1]}: {item[3]}")
        return "; ".join(msgs) or "a process stopped without a message"

    def wait(self, timeout: float | None = None) -> None:
        try:
            self.barrier.wait(timeout or self.timeout)
        except threading.BrokenBarrierError:
            raise RuntimeError(f"two-process run failed: {self._failed()}") from None

    def collect(self, index: int) -> dict:
        got = {}
        while len(got) < 2:
            try:
                item = self.results.get(timeout=self.timeout)
            except Exception:  # noqa: BLE001 - queue.Empty
                raise RuntimeError("two-process run: no result in time") from None
            if item[0] == "error":
                self.barrier.abort()
                raise RuntimeError(f"two-process run failed: process {item[1]}: {item[3]}")
            if item[2] == index:
                got[item[1]] = item[3]
        return got

    def close(self) -> None:
        """Join both processes; where one still waits (the parent failed first), break the
        barrier so that it stops, then end it."""
        for p in self.procs:
            p.join(timeout=10)
        if any(p.is_alive() for p in self.procs):
            self.barrier.abort()
        for p in self.procs:
            p.join(timeout=20)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)

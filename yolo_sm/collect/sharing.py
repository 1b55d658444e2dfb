"""Two models on one GPU at once: each engine alone, both in one process on two CUDA streams,
and both in two processes started together, with the NVML GPM timeline of the whole run and a
short PyTorch-profiler capture of each in-process run (which kernel classes run beside which).

Each engine (a CUDA graph of one forward by default, so the host is not the limit) replays on
its own stream for ``seconds`` of wall time with ``depth`` batches in flight; CUDA events
around every replay give each batch's start and end on one clock, from which
:func:`yolo_sm.analyse.sharing.window_rows` takes img/s and latency quantiles over the window
in which every engine of the run was busy. In the two-process mode each process times its
own engine on its own clock, after a barrier that starts both together.

MPS and MIG are only detected (:func:`gpu_sharing_settings`): the step never changes the
GPU's compute mode or MIG mode, so the rows record that neither was used.

On a CPU the same code runs eagerly, engine after engine on one thread (a degenerate mode for
tests), without GPM or traces.
"""

from __future__ import annotations

import bisect
import multiprocessing
import os
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

from yolo_sm.analyse.kernels import classify
from yolo_sm.analyse.sharing import kernel_classes, pair_label, window_rows
from yolo_sm.collect.devices import nvml_index
from yolo_sm.collect.engines import EngineConfig, build_engine
from yolo_sm.collect.models import build
from yolo_sm.collect.profiling.gpm import GpmSampler
from yolo_sm.collect.profiling.kineto import read_trace
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import config_label
from yolo_sm.contract.plans import parse_pair

#: record_function range around each replay of a traced run: RANGE + engine name
RANGE = "sharing_engine_"
DEFAULT_PAIRS = ("1.0x16+0.25x1", "0.5x16+0.5x16")
#: how long the parent waits at a barrier or for a result of the two processes (s)
PROCESS_TIMEOUT_S = 180.0


# ---- the GPU's sharing settings (read, never changed) -----------------------------------------


def gpu_sharing_settings(device: str = "cuda") -> dict:
    """``mps_server`` (running / not running: an MPS control pipe exists), ``mig_mode`` and
    ``compute_mode`` as NVML reads them ("unknown" where it cannot), and ``mps_used`` /
    ``mig_used``, always False: this module leaves the GPU's settings as they are."""
    pipe = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")) / "control"
    out = {
        "mps_server": "running" if pipe.exists() else "not running",
        "mig_mode": "unknown",
        "compute_mode": "unknown",
        "mps_used": False,
        "mig_used": False,
    }
    if not str(device).startswith("cuda"):
        return {**out, "mig_mode": "no GPU", "compute_mode": "no GPU"}
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: the settings stay unknown
        return out
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(nvml_index(device))
        modes = {
            getattr(pynvml, "NVML_COMPUTEMODE_DEFAULT", 0): "default",
            getattr(pynvml, "NVML_COMPUTEMODE_EXCLUSIVE_THREAD", 1): "exclusive_thread",
            getattr(pynvml, "NVML_COMPUTEMODE_PROHIBITED", 2): "prohibited",
            getattr(pynvml, "NVML_COMPUTEMODE_EXCLUSIVE_PROCESS", 3): "exclusive_process",
        }
        try:
            out["compute_mode"] = modes.get(pynvml.nvmlDeviceGetComputeMode(h), "unknown")
        except pynvml.NVMLError:
            pass
        try:
            current, _pending = pynvml.nvmlDeviceGetMigMode(h)
            out["mig_mode"] = "enabled" if current else "disabled"
        except pynvml.NVMLError:
            out["mig_mode"] = "unsupported"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return out


# ---- running engines side by side ---------------------------------------------------------------


def run_engines(engines, seconds: float, depth: int = 2, streams=None, ranges=None):
    """Replay each ``(engine, input)`` of ``engines`` for ``seconds`` of wall time, each on its
    own CUDA stream (``streams``, made here when None) with up to ``depth`` batches in flight;
    returns per engine ``(starts_ms, ends_ms)``, every batch's CUDA events on one clock.
    ``ranges`` (names, one per engine) wraps each replay in a ``record_function`` range
    :data:`RANGE` + name, for a trace. On a CPU the engines run one call after the other."""
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
        for i, (eng, x) in enumerate(engines):
            q = inflight[i]
            while q and q[0][1].query():
                q.popleft()
            if len(q) >= depth:
                continue
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(streams[i]), marks(i):
                start.record()
                eng(x)
                end.record()
            q.append((start, end))
            events[i].append((start, end))
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


# ---- engines of a pair --------------------------------------------------------------------------


def engine_config(side, opts: dict) -> EngineConfig:
    width, batch = side
    return EngineConfig(
        backend=opts["backend"],
        precision=opts["precision"],
        layout=opts["layout"],
        batch=batch,
        imgsz=opts["imgsz"],
        device=opts["device"],
    )


def build_side(model, side, opts: dict):
    """(engine, its input) of one side of a pair, warmed up (cuDNN tuned, graph captured)."""
    eng = build_engine(model, engine_config(side, opts))
    x = eng._input if eng._input is not None else eng.make_input(0)
    for _ in range(3):
        eng(x)
    if opts["device"].startswith("cuda"):
        import torch

        torch.cuda.synchronize(opts["device"])
    return eng, x


def _row(opts, pair, mode, engine, side, stats) -> dict:
    width, batch = side
    cfg = config_label(opts["family"], width, opts["precision"], opts["layout"], batch)
    return {
        "pair": pair,
        "mode": mode,
        "engine": engine,
        "config": cfg,
        "family": opts["family"],
        "width": float(width),
        "batch": int(batch),
        "precision": opts["precision"],
        "layout": opts["layout"],
        "backend": opts["backend"],
        "imgsz": opts["imgsz"],
        "depth": opts["depth"],
        **stats,
    }


# ---- two processes ------------------------------------------------------------------------------


def process_worker(slot, sides, opts, barrier, results, timeout_s):
    """One process of the two-process mode: builds its side of every pair on the CPU, waits
    for the parent, then per pair builds its engine on the GPU, waits until the other process
    has built its own, runs for ``opts["seconds"]`` and reports ``("ok", slot, pair_index,
    (starts, ends))``; an error is reported as ``("error", slot, -1, message)`` and breaks the
    barrier, so that no one waits for it."""
    try:
        import torch

        torch.set_num_threads(2)  # the parent times its own engines meanwhile
        models = [build(opts["family"], side[0]) for side in sides]
        barrier.wait(timeout_s)  # the parent's own runs are over
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


class _Processes:
    """The parent's side of the two-process mode (spawned at the start, so that their imports
    and CPU model builds overlap the parent's own runs)."""

    def __init__(self, pairs, opts):
        ctx = multiprocessing.get_context("spawn")
        self.barrier = ctx.Barrier(3)
        self.results = ctx.Queue()
        self.timeout = PROCESS_TIMEOUT_S
        self.procs = [
            ctx.Process(
                target=process_worker,
                args=(slot, [p[k] for p in pairs], opts, self.barrier, self.results, self.timeout),
                name=f"sharing-{slot}",
                daemon=True,
            )
            for k, slot in enumerate(("a", "b"))
        ]
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

    def wait(self) -> None:
        try:
            self.barrier.wait(self.timeout)
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
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)


# ---- traces -------------------------------------------------------------------------------------


def engine_kernels(path, names):
    """Kernel rows of a trace taken by :func:`run_engines` with ``ranges=names``: ``engine``
    (the range around the launch whose correlation the kernel carries), ``kernel_name``,
    ``kernel_class``, ``start_us``, ``duration_us``, ``stream``; and per engine the replays the
    capture holds. Kernels launched outside every range are left out."""
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
        launch = launches.get(k.get("args", {}).get("correlation"))
        if launch is None:
            continue
        key = (launch.get("pid"), launch.get("tid"))
        ts = float(launch["ts"])
        i = bisect.bisect_right(starts.get(key, []), ts) - 1
        if i < 0 or ts > spans[key][i][1]:
            continue
        rows.append(
            {
                "engine": spans[key][i][2],
                "kernel_name": k.get("name", ""),
                "start_us": float(k["ts"]),
                "duration_us": float(k.get("dur", 0.0)),
                "stream": k.get("args", {}).get("stream"),
            }
        )
    df = pd.DataFrame(rows, columns=["engine", "kernel_name", "start_us", "duration_us", "stream"])
    df["kernel_class"] = df.kernel_name.map(classify)
    return df, replays


def trace_run(engines, names, streams, seconds, depth, folder):
    """A short PyTorch-profiler capture of :func:`run_engines` (kernels only, the trace file
    removed after reading): :func:`engine_kernels` of it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_engines(engines, seconds, depth, streams, ranges=names)
    path = Path(folder) / f"trace-{'-'.join(names)}.json"
    prof.export_chrome_trace(str(path))
    try:
        return engine_kernels(path, names)
    finally:
        path.unlink(missing_ok=True)


# ---- the whole step -----------------------------------------------------------------------------


def options(params: dict, device: str) -> dict:
    """The step's settings with their defaults (``params`` as checked by the plan)."""
    p = dict(params)
    return {
        "family": str(p.get("family") or "yolov8"),
        "precision": str(p.get("precision") or "fp16"),
        "layout": str(p.get("layout") or "nhwc"),
        "backend": str(p.get("backend") or ("cudagraph" if device.startswith("cuda") else "eager")),
        "imgsz": int(p.get("imgsz") or 640),
        "seconds": float(p.get("seconds") or 2.0),
        "gap_s": float(p.get("gap_s") if p.get("gap_s") is not None else 0.3),
        "depth": int(p.get("depth") or 2),
        "hz": float(p.get("hz") or 20.0),
        "processes": bool(p.get("processes", True)),
        "trace_s": float(p.get("trace_s") if p.get("trace_s") is not None else 0.25),
        "device": str(device),
    }


def run_sharing(pairs=DEFAULT_PAIRS, device: str = "cuda", **params) -> dict:
    """Measure every pair (``"1.0x16+0.25x1"``: width x batch of engine a, then b) alone,
    on two streams and in two processes. Returns ``{"sharing", "gpm", "kernels"}`` tables and
    the GPM sampler's ``info`` under ``"sampler"``."""
    import pandas as pd

    opts = options(params, device)
    parsed = [parse_pair(p, "sharing pair") if isinstance(p, str) else tuple(p) for p in pairs]
    if not parsed:
        raise UserError("sharing needs at least one pair")
    labels = [pair_label(*p) for p in parsed]
    on_gpu = device.startswith("cuda")
    settings = gpu_sharing_settings(device)
    procs = _Processes(parsed, opts) if opts["processes"] else None
    rows, kernel_frames = [], []
    sampler = GpmSampler(hz=opts["hz"], index=nvml_index(device), power=True) if on_gpu else None
    try:
        with sampler if sampler is not None else _NoSampler() as s:
            for side_pair, pair in zip(parsed, labels, strict=True):
                rows += _in_process(side_pair, pair, opts, s, kernel_frames)
            if procs is not None:
                s.mark(pair="", mode="processes", phase="build", config="")
                procs.wait()  # the processes may now use the GPU
                for i, (side_pair, pair) in enumerate(zip(parsed, labels, strict=True)):
                    s.mark(pair=pair, mode="processes", phase="build", config=f"{pair} processes")
                    procs.wait()  # both built
                    s.mark(phase="run")
                    got = procs.collect(i)
                    procs.wait()  # both done
                    s.mark(phase="idle")
                    for eng, side in zip(("a", "b"), side_pair, strict=True):
                        (stats,) = window_rows([got[eng]], [side[1]], common=False)
                        rows.append(_row(opts, pair, "processes", eng, side, stats))
            s.mark(pair="", mode="", phase="idle", config="")
            time.sleep(opts["gap_s"])
    finally:
        if procs is not None:
            procs.close()
    sharing = pd.DataFrame(rows).assign(**settings)
    gpm = sampler.to_frame() if sampler is not None else _empty_gpm()
    kernels = (
        pd.concat(kernel_frames, ignore_index=True)
        if kernel_frames
        else kernel_classes(pd.DataFrame(), {}, "", "")
    )
    return {
        "sharing": sharing,
        "gpm": gpm,
        "kernels": kernels,
        "sampler": sampler.info() if sampler is not None else {},
    }


def _in_process(side_pair, pair, opts, s, kernel_frames) -> list[dict]:
    """Both engines of a pair in this process: alone, then together on two streams, then the
    short traces of the same three runs."""
    on_gpu = opts["device"].startswith("cuda")
    s.mark(pair=pair, mode="", phase="build", config="")
    models = [build(opts["family"], side[0]) for side in side_pair]
    built = [build_side(m, side, opts) for m, side in zip(models, side_pair, strict=True)]
    streams = None
    if on_gpu:
        import torch

        streams = [torch.cuda.Stream(device=opts["device"]) for _ in built]
    plan = (("alone_a", (0,)), ("alone_b", (1,)), ("streams", (0, 1)))
    rows = []
    try:
        for mode, idx in plan:
            s.mark(mode=mode, phase="idle", config=f"{pair} {mode}")
            time.sleep(opts["gap_s"])
            s.mark(phase="run")
            runs = run_engines(
                [built[i] for i in idx],
                opts["seconds"],
                opts["depth"],
                [streams[i] for i in idx] if streams else None,
            )
            batches = [side_pair[i][1] for i in idx]
            # on a CPU the engines take turns on one thread: each is timed over its own span
            stats_rows = window_rows(runs, batches, common=on_gpu)
            for i, stats in zip(idx, stats_rows, strict=True):
                rows.append(_row(opts, pair, mode, "ab"[i], side_pair[i], stats))
        if on_gpu and opts["trace_s"] > 0:
            with tempfile.TemporaryDirectory() as tmp:
                for mode, idx in plan:
                    s.mark(mode=mode, phase="trace", config=f"{pair} {mode}")
                    names = ["ab"[i] for i in idx]
                    k, replays = trace_run(
                        [built[i] for i in idx],
                        names,
                        [streams[i] for i in idx],
                        opts["trace_s"],
                        opts["depth"],
                        tmp,
                    )
                    kernel_frames.append(kernel_classes(k, replays, pair, mode))
    finally:
        for eng, _ in built:
            eng.close()
    s.mark(mode="", phase="idle", config="")
    return rows


class _NoSampler:
    """Stands in for the GPM sampler on a CPU: marks go nowhere."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def mark(self, **labels) -> None:
        pass


def _empty_gpm():
    import pandas as pd

    return pd.DataFrame(columns=["t_s", "window_s", "metric", "value", "source"])


def run_sharing_step(params: dict, device: str) -> dict:
    """:func:`run_sharing` with a plan step's params (``pairs`` already parsed by the plan
    check, or texts)."""
    p = dict(params)
    pairs = p.pop("pairs", None) or DEFAULT_PAIRS
    if isinstance(pairs, str):
        pairs = [pairs]
    pairs = [parse_pair(x) if isinstance(x, str) else x for x in pairs]
    return run_sharing(pairs, device, **p)

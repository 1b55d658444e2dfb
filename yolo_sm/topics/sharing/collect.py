"""Two models on one GPU: each alone, on two CUDA streams, in two processes, with GPM and short
profiler captures (MPS and MIG only detected; on a CPU the engines take turns, for tests)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import config_label
from yolo_sm.core.devices import nvml_handle, nvml_index
from yolo_sm.core.models import build
from yolo_sm.core.profiling.gpm import GpmSampler
from yolo_sm.topics.sharing import parse_pair
from yolo_sm.topics.sharing.analyse import kernel_classes, pair_label, window_rows
from yolo_sm.topics.sharing.collect_run import Processes, build_side, run_engines, trace_run

DEFAULT_PAIRS = ("1.0x16+0.25x1", "0.5x16+0.5x16")


def gpu_sharing_settings(device: str = "cuda") -> dict:
    """MPS server, MIG and compute mode as NVML reads them; ``*_used`` always False."""
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
    pynvml, h = nvml_handle(nvml_index(device))
    if h is None:  # no NVML: the settings stay unknown
        return out
    try:  # NVML_COMPUTEMODE_* values, fixed by NVML's C API
        modes = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
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
    """Every pair (``"1.0x16+0.25x1"``) alone, on two streams and in two processes:
    ``{"sharing", "gpm", "kernels"}`` tables and the sampler's ``info``."""
    import pandas as pd

    opts = options(params, device)
    parsed = [parse_pair(p, "sharing pair") if isinstance(p, str) else tuple(p) for p in pairs]
    if not parsed:
        raise UserError("sharing needs at least one pair")
    labels = [pair_label(*p) for p in parsed]
    on_gpu = device.startswith("cuda")
    settings = gpu_sharing_settings(device)
    procs = Processes(parsed, opts) if opts["processes"] else None
    rows, kernel_frames = [], []
    sampler = GpmSampler(hz=opts["hz"], index=nvml_index(device), power=True) if on_gpu else None
    try:
        with sampler if sampler is not None else nullcontext(_NO_SAMPLER) as s:
            for side_pair, pair in zip(parsed, labels, strict=True):
                rows += _in_process(side_pair, pair, opts, s, kernel_frames)
            if procs is not None:
                try:
                    rows += _two_processes(procs, parsed, labels, opts, s)
                except RuntimeError as e:  # the in-process rows are kept; the mode is missing
                    print(f"sharing: no two-process rows: {e}", file=sys.stderr)
            s.mark(pair="", mode="", phase="idle", config="")
            time.sleep(opts["gap_s"])
    finally:
        if procs is not None:
            procs.close()
    sharing = pd.DataFrame(rows).assign(**settings)
    gpm = sampler.to_frame() if sampler is not None else _empty_gpm()
    kernels = [*kernel_frames, kernel_classes(pd.DataFrame(), {}, "", "")]
    kernels = pd.concat(kernels[:-1], ignore_index=True) if kernel_frames else kernels[-1]
    info = sampler.info() if sampler is not None else {}
    return {"sharing": sharing, "gpm": gpm, "kernels": kernels, "sampler": info}


def _two_processes(procs, parsed, labels, opts, s) -> list[dict]:
    """The two-process mode, pair by pair (the processes were started at the beginning)."""
    rows = []
    s.mark(pair="", mode="processes", phase="build", config="")
    procs.wait(3 * procs.timeout)  # the processes may now use the GPU
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
    return rows


def _in_process(side_pair, pair, opts, s, kernel_frames) -> list[dict]:
    """Both engines of a pair alone, then on two streams, then short traces of the three."""
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
            on = [streams[i] for i in idx] if streams else None
            runs = run_engines([built[i] for i in idx], opts["seconds"], opts["depth"], on)
            batches = [side_pair[i][1] for i in idx]
            # on a CPU the engines take turns on one thread: each is timed over its own span
            stats_rows = window_rows(runs, batches, common=on_gpu)
            for i, stats in zip(idx, stats_rows, strict=True):
                rows.append(_row(opts, pair, mode, "ab"[i], side_pair[i], stats))
        if on_gpu and opts["trace_s"] > 0:
            learnt = {}  # stream -> engine, from the captures of each engine alone
            with tempfile.TemporaryDirectory() as tmp:
                for mode, idx in plan:
                    s.mark(mode=mode, phase="trace", config=f"{pair} {mode}")
                    names = ["ab"[i] for i in idx]
                    engines, on = [built[i] for i in idx], [streams[i] for i in idx]
                    args = (opts["trace_s"], opts["depth"], tmp, learnt)
                    k, replays = trace_run(engines, names, on, *args)
                    if len(idx) == 1:
                        learnt.update(dict.fromkeys(k.stream.dropna().unique(), names[0]))
                    kernel_frames.append(kernel_classes(k, replays, pair, mode))
    finally:
        for eng, _ in built:
            eng.close()
    s.mark(mode="", phase="idle", config="")
    return rows


#: stands in for the GPM sampler on a CPU: marks go nowhere
_NO_SAMPLER = SimpleNamespace(mark=lambda **labels: None)


def _empty_gpm():
    import pandas as pd

    return pd.DataFrame(columns=["t_s", "window_s", "metric", "value", "source"])

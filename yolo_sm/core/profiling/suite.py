"""All three profilers on the same configs, joined per layer (``yolo-sm profile``): Kineto
traces, one ncu pass, a GPM timeline (never under ncu) and the sampler's overhead. Writes
kineto/ncu/gpm/gpm_overhead/layers ``.parquet``, ``summary.json``, ``traces/``, ``ncu.csv``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from functools import partial
from pathlib import Path

from yolo_sm.analyse.gpm import SUMMARY_METRICS, overhead_pct, run_medians
from yolo_sm.analyse.weighting import layer_view, weighted_mean
from yolo_sm.contract.store import write_atomic, write_text_atomic
from yolo_sm.core.devices import nvml_index
from yolo_sm.core.models.spec import ModelSpec, parse_models
from yolo_sm.core.profiling import kineto as kin
from yolo_sm.core.profiling import ncu
from yolo_sm.core.profiling.gpm import GpmSampler
from yolo_sm.core.profiling.target import engines, target_argv
from yolo_sm.core.provenance import collect, stamp


def run_gpm(built, seconds: float = 3.0, gap_s: float = 0.5, hz: float = 20.0):
    """Run each (label, engine, input) of ``built`` for ``seconds`` under one GpmSampler (marked
    ``phase="run"`` after ``gap_s`` of ``"idle"``); returns (frame, sampler info)."""
    import torch

    for _, eng, x in built:
        eng(x)  # built and autotuned before sampling starts
    torch.cuda.synchronize()
    # the GPU the engines run on, as NVML numbers it
    gpu = nvml_index(built[0][1].config.device) if built else 0
    with GpmSampler(hz=hz, index=gpu) as sampler:
        for label, eng, x in built:
            sampler.mark(config=label, phase="idle")
            time.sleep(gap_s)
            sampler.mark(config=label, phase="run")
            _loop(eng, x, seconds)
        sampler.mark(config="", phase="idle")
        time.sleep(gap_s)
    return sampler.to_frame(), sampler.info()


def _loop(eng, x, seconds: float) -> int:
    """Forwards of ``eng`` for about ``seconds`` (synchronised every 10); returns the count."""
    import torch

    n, t_end = 0, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        for _ in range(10):
            eng(x)
        n += 10
        torch.cuda.synchronize()
    return n


def gpm_overhead(eng, x, label: str, rounds: int = 6, seconds: float = 1.0, hz: float = 20.0):
    """Throughput with and without a GPM sampler, in alternating rounds of ``seconds`` (so a
    clock or thermal drift hits both): one row per round with ``sampler`` on/off and img/s."""
    import pandas as pd
    import torch

    batch = int(x.shape[0])
    gpu = nvml_index(eng.config.device)  # the GPU the engine runs on, as NVML numbers it
    _loop(eng, x, 0.5)  # warm
    rows = []
    for r in range(rounds):
        for on in (r % 2 == 0, r % 2 == 1):  # alternate which goes first
            torch.cuda.synchronize()
            with GpmSampler(hz=hz, index=gpu) if on else contextlib.nullcontext():
                t0 = time.perf_counter()
                n = _loop(eng, x, seconds)
                dt = time.perf_counter() - t0
            row = {"config": label, "round": r, "sampler": on, "hz": hz, "forwards": n}
            rows.append({**row, "seconds": dt, "img_per_s": n * batch / dt})
    return pd.DataFrame(rows)


def join_layers(kineto, ncu, gpm=None):
    """One row per (config, layer, module_type, stage): Kineto and ncu kernel counts and times,
    theoretical / estimated / achieved occupancy, limiter, the config's median GPM metrics and
    ``kernels_match``."""
    import pandas as pd

    by = ["config", "layer", "module_type", "stage"]
    k = kineto[kineto.iteration.notna()]
    iters = k.groupby("config").iteration.nunique()
    kv = layer_view(k, by=by)
    kv = kv.assign(
        kernels=kv.kernels / kv.config.map(iters), time_us=kv.time_us / kv.config.map(iters)
    )
    cols = "kernels time_us theoretical_occupancy_tw_pct est_occupancy_tw_pct main_limiter"
    kv = kv[[*by, *cols.split(), "tensor_core_time_share"]]
    renamed = ("kernels", "time_us", "theoretical_occupancy_tw_pct", "main_limiter")
    kv = kv.rename(columns={c: f"kineto_{c}" for c in renamed})
    nv = layer_view(ncu, by=by)
    cols = "kernels time_us theoretical_occupancy_tw_pct achieved_occupancy_tw_pct"
    keep = [
        c for c in (*cols.split(), "tensor_pipe_tw_pct", "sm_coverage_tw", "time_share") if c in nv
    ]
    renamed = {c: f"ncu_{c}" for c in (*cols.split(), "time_share")}
    nv = nv[[*by, *keep]].rename(columns=renamed)
    out = kv.merge(nv, on=by, how="outer")
    out["kernels_match"] = out.kineto_kernels == out.ncu_kernels
    if gpm is not None and not gpm.empty:
        med = run_medians(gpm).set_index("config")
        med = med[[c for c in SUMMARY_METRICS if c in med]].add_prefix("gpm_").reset_index()
        out = out.merge(med, on="config", how="left")
    return pd.DataFrame(out)


def unattributed(kineto, ncu) -> dict:
    """Kernels of a profiled forward that no layer range enclosed, per profiler."""
    k = kineto[kineto.iteration.notna()]
    return {
        "kineto": int((k.layer == "").sum()),
        "kineto_total": len(k),
        "ncu": int((ncu.layer.fillna("") == "").sum()),
        "ncu_total": len(ncu),
    }


def summary(layers, unattr, ncu_wall_s, n_forwards, overhead, gpm_info) -> dict:
    """Headline numbers: per config total time, occupancies, the slowest layer, GPM medians."""

    per_config = {}
    for cfg, g in layers.groupby("config"):
        w = g.ncu_time_us.fillna(0)

        def tw(col, g=g, w=w):
            return weighted_mean(g[col], w) if col in g else math.nan

        top = g.sort_values("ncu_time_us", ascending=False).iloc[0]
        per_config[cfg] = {
            "layers": len(g),
            "kineto_time_ms_per_forward": float(g.kineto_time_us.sum() / 1e3),
            "ncu_time_ms_per_forward": float(g.ncu_time_us.sum() / 1e3),
            "theoretical_occupancy_tw_pct": tw("ncu_theoretical_occupancy_tw_pct"),
            "achieved_occupancy_tw_pct": tw("ncu_achieved_occupancy_tw_pct"),
            "kineto_est_occupancy_tw_pct": tw("est_occupancy_tw_pct"),
            "layers_kernel_count_mismatch": int((~g.kernels_match).sum()),
            "slowest_layer": f"{top.layer} {top.module_type}",
            "slowest_layer_share": float(top.ncu_time_us / g.ncu_time_us.sum()),
            **{c: float(g[c].iloc[0]) for c in g if c.startswith("gpm_")},
        }
    return {
        "configs": per_config,
        "unattributed_kernels": unattr,
        "ncu_wall_s": ncu_wall_s,
        "ncu_s_per_forward": ncu_wall_s / n_forwards if n_forwards else math.nan,
        "gpm_overhead_pct": overhead,
        "gpm_sampler": gpm_info,
    }


def profile_all(
    out_dir: str | os.PathLike,
    family: str = "yolov8",
    widths=(0.5, 1.5),
    precision: str = "fp16",
    layout: str = "nhwc",
    batch: int = 8,
    imgsz: int = 640,
    device: str = "cuda",
    metric_set: str = "occupancy",
    iters: int = 2,
    gpm_seconds: float = 3.0,
    gpm_hz: float = 20.0,
    overhead_rounds: int = 8,
    ncu_timeout_s: float = 480,
    log=print,
    models=None,
    input_shape=None,
) -> dict:
    """Run the three profilers on each width (see the module docstring); returns the summary.
    ``models`` (specs, :mod:`yolo_sm.core.models.spec`) replace ``family`` and ``widths``."""
    import pandas as pd

    out = Path(out_dir)  # a folder on a CUDA device: the command checked both
    out.mkdir(parents=True, exist_ok=True)
    specs = list(parse_models(models, input_shape, need_shape=False)) if models else []
    widths = specs or [float(w) for w in widths]
    prov = collect(device)
    names = [w.text if isinstance(w, ModelSpec) else w for w in widths]
    meta = {"provenance": prov, "family": family, "widths": names, "precision": precision}
    meta.update(layout=layout, batch=batch, imgsz=imgsz)

    # 1. Kineto: eager forwards with layer ranges
    grid = [(w, precision, layout, batch) for w in widths]
    frames = []
    for label, eng, x in engines(family, grid, imgsz, device):
        trace = out / "traces" / f"kineto-{label}.json.gz"
        path = kin.capture(partial(eng, x), trace, model=eng.module, iters=iters, device=device)
        frames.append(kin.load_kernels(path).assign(config=label))
        eng.close()
        log(f"kineto: {label}: {len(frames[-1])} kernels")
    k = pd.concat(frames, ignore_index=True)
    write_atomic(k.assign(**stamp(prov)), out / "kineto.parquet", meta)

    # 2. Nsight Compute: one process, every config in NVTX ranges
    ws = "1.0" if specs else ",".join(f"{w:g}" for w in widths)
    argv = (family, ws, precision, layout, str(batch), imgsz, device)
    target = target_argv(*argv, models=specs or None, input_shape=input_shape)
    t0 = time.perf_counter()
    n = ncu.profile(target, out / "ncu.csv", metric_set=metric_set, timeout_s=ncu_timeout_s)
    ncu_wall = time.perf_counter() - t0
    ncu_meta = {**meta, "metric_set": metric_set, "wall_s": ncu_wall}
    write_atomic(n.assign(**stamp(prov)), out / "ncu.parquet", ncu_meta)
    log(f"ncu: {len(n)} kernels in {ncu_wall:.0f} s ({metric_set} set)")

    # 3. GPM timeline, then the sampler's overhead (after ncu has exited)
    built = list(engines(family, grid, imgsz, device))
    g, info = run_gpm(built, seconds=gpm_seconds, hz=gpm_hz)
    write_atomic(g.assign(**stamp(prov)), out / "gpm.parquet", {**meta, "sampler": info})
    label, eng, x = built[-1]  # the widest: least launch-bound, so the least noisy
    ov = gpm_overhead(eng, x, label, rounds=overhead_rounds, hz=gpm_hz)
    write_atomic(ov.assign(**stamp(prov)), out / "gpm_overhead.parquet", meta)
    for _, e, _ in built:
        e.close()
    log(
        f"gpm: {info.get('polls')} polls, {info.get('stale_polls')} stale, "
        f"{overhead_pct(ov):+.2f} % overhead"
    )

    # 4. per-layer join
    layers = join_layers(k, n, g)
    write_atomic(layers.assign(**stamp(prov)), out / "layers.parquet", meta)
    s = summary(layers, unattributed(k, n), ncu_wall, len(widths), overhead_pct(ov), info)
    s.update(meta)
    write_text_atomic(out / "summary.json", json.dumps(s, indent=1, default=str))
    return s

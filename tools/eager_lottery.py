"""Why do eager small-batch points land at two speeds? Build the same engine in fresh processes.

In `h200/sweep_bf16_nhwc` consecutive eager batch-1/2 points, two seconds apart, sit at either
~4.1-4.9 ms or ~6-9 ms per forward, each with a tight IQR: a state fixed per build or per
process decides it. Candidates: cuDNN's benchmark mode picking algorithms with more or fewer
kernels per forward (its choices are cached per process, so only a fresh process picks again),
or where the host thread runs. This tool builds one eager engine in ``--procs`` fresh
processes; each times it (yolo_sm.collect.timing: warm-up, CUDA events, median / IQR), profiles one
forward (torch.profiler: kernels per forward, a digest of the sorted kernel names, the
convolution kernels' names) and notes the CPU it ran on. Slow and fast processes with different
kernel digests point at cuDNN's picks; the same digest at two speeds points at the host.

    python3 tools/eager_lottery.py --width 1.0 --batch 1 --procs 8 --out $OUT/lottery.jsonl

Prints one line per process, sorted by median, and writes them as JSON lines to --out. On a CPU
it runs (``--device cpu``) but counts no kernels: a dry run of the plumbing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys


def _last_cpu() -> int | None:
    """The CPU this process last ran on (Linux /proc/self/stat, field 39), else None."""
    try:
        with open("/proc/self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def child(a) -> dict:
    import os

    import torch

    from yolo_sm.collect.engines import EngineConfig, build_engine
    from yolo_sm.collect.models import build_yolo
    from yolo_sm.collect.timing import measure_engine

    cfg = EngineConfig(
        backend="eager",
        precision=a.precision,
        layout="nhwc",
        batch=a.batch,
        imgsz=a.imgsz,
        device=a.device,
        check=False,
    )
    engine = build_engine(build_yolo("yolov8", a.width), cfg)
    m = measure_engine(engine, budget_ms=a.budget_ms)
    x = engine._input if engine._input is not None else engine.make_input(seed=0)
    acts = [torch.profiler.ProfilerActivity.CPU]
    if a.device.startswith("cuda"):
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        engine(x)
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
    kernels = [
        e.name
        for e in prof.events()
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
    ]
    convs = sorted({k for k in kernels if "conv" in k.lower() or "xmma" in k.lower()})
    return {
        "width": a.width,
        "batch": a.batch,
        "precision": a.precision,
        "median_ms": m.median_ms,
        "iqr_ms": m.iqr_ms,
        "n_samples": m.n,
        "kernels_per_forward": len(kernels),
        "kernel_digest": hashlib.sha256("\n".join(sorted(kernels)).encode()).hexdigest()[:10],
        "conv_kernels": convs,
        "last_cpu": _last_cpu(),
        "pid": os.getpid(),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--precision", default="fp16", choices=["fp16", "bf16"])
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--budget-ms", type=float, default=300.0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a)))
        return 0
    rows = []
    cmd = [sys.executable, __file__, "--child", "--out", a.out]
    for k in ("width", "batch", "precision", "imgsz", "budget_ms", "device"):
        cmd += [f"--{k.replace('_', '-')}", str(getattr(a, k))]
    for i in range(a.procs):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            last = (r.stderr.strip().splitlines() or ["no message"])[-1]
            print(f"process {i} failed: {last}", file=sys.stderr)
            return 1
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]) | {"proc": i})
    with open(a.out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    for r in sorted(rows, key=lambda r: r["median_ms"]):
        print(
            f"proc {r['proc']}: {r['median_ms']:.3f} ms (IQR {r['iqr_ms']:.3f}, "
            f"n {r['n_samples']}), "
            f"{r['kernels_per_forward']} kernels, digest {r['kernel_digest']}, "
            f"{len(r['conv_kernels'])} distinct conv kernels, cpu {r['last_cpu']}"
        )
    digests = {r["kernel_digest"] for r in rows}
    print(f"{len(rows)} processes, {len(digests)} distinct kernel sets")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

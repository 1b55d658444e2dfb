"""PyTorch's caching allocator over a run of changing batch sizes.

One eager model runs ``forwards`` batches of sizes drawn at random (seeded) between
``batch_min`` and ``batch_max``; after every forward ``torch.cuda.memory_stats`` gives allocated,
reserved and inactive-split bytes (fragmentation), segments, allocation retries, and the peaks
of that forward. The allocator reads ``PYTORCH_CUDA_ALLOC_CONF`` once, when CUDA starts, so each
configuration of :data:`ALLOC_CONFS` runs in its own fresh process (:func:`pool_table`).
cuDNN's algorithm search is off by default (``cudnn_benchmark``); ``first_of_batch`` marks the
first forward at each size.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from yolo_sm.contract.errors import UserError
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.engines.base import DTYPES
from yolo_sm.core.models import build_yolo

#: The allocator configurations compared: PyTorch's default (fixed-size segments, split and
#: cached) and expandable segments (one virtual range per stream that grows by mapping pages).
ALLOC_CONFS = ("default", "expandable_segments:True")

COLUMNS = (
    "alloc_conf", "step", "batch", "first_of_batch", "allocated_bytes", "reserved_bytes",
    "active_bytes", "inactive_split_bytes", "segments", "alloc_retries", "peak_allocated_bytes",
    "peak_reserved_bytes", "latency_ms", "model", "family", "width", "imgsz", "precision",
    "layout", "device", "seed", "cudnn_benchmark",
)  # fmt: skip

_STATS = {
    "allocated_bytes": "allocated_bytes.all.current",
    "reserved_bytes": "reserved_bytes.all.current",
    "active_bytes": "active_bytes.all.current",
    "inactive_split_bytes": "inactive_split_bytes.all.current",
    "segments": "segment.all.current",
    "alloc_retries": "num_alloc_retries",
    "peak_allocated_bytes": "allocated_bytes.all.peak",
    "peak_reserved_bytes": "reserved_bytes.all.peak",
}


def batch_sequence(forwards: int, batch_min: int, batch_max: int, seed: int = 0) -> list[int]:
    """The run's batch sizes: ``forwards`` draws, uniform between ``batch_min`` and
    ``batch_max`` (inclusive), from a generator seeded with ``seed`` (the same in every
    configuration)."""
    if not 1 <= int(batch_min) <= int(batch_max):
        raise UserError(f"batch_min ({batch_min}) must be >= 1 and <= batch_max ({batch_max})")
    if int(forwards) < 1:
        raise UserError(f"forwards must be at least 1, got {forwards}")
    rng = random.Random(int(seed))
    return [rng.randint(int(batch_min), int(batch_max)) for _ in range(int(forwards))]


def pool_rows(*, model="yolov8", width=1.0, forwards=200, batch_min=1, batch_max=64, imgsz=640,
              precision="fp16", layout="nhwc", device="cuda", seed=0, cudnn_benchmark=False,
              alloc_conf="default"):  # fmt: skip
    """Run the sequence of :func:`batch_sequence` in this process and return one row per
    forward (:data:`COLUMNS`). ``alloc_conf`` only labels the rows: the configuration in effect
    is the one this process started CUDA with (:func:`pool_table` sees to it). On a CPU the
    allocator columns are NaN and only the latency is measured."""
    import pandas as pd

    batches = batch_sequence(forwards, batch_min, batch_max, seed)
    cfg = EngineConfig(backend="eager", precision=precision, layout=layout, batch=int(batch_max),
                       imgsz=int(imgsz), device=device, cudnn_benchmark=bool(cudnn_benchmark),
                       check=False)  # fmt: skip
    cuda = str(device).startswith("cuda") and torch.cuda.is_available()
    engine = build_engine(build_yolo(model, float(width), calibrate=False), cfg)
    fmt = torch.channels_last if cfg.layout.value == "nhwc" else torch.contiguous_format
    gen = torch.Generator(device=device).manual_seed(int(seed))
    seen, rows = set(), []
    try:
        for step, b in enumerate(batches):
            shape = (b, 3, cfg.imgsz, cfg.imgsz)
            x = torch.empty(shape, dtype=DTYPES[cfg.precision], device=device, memory_format=fmt)
            x.uniform_(0, 1, generator=gen)
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()  # the peaks of this forward alone
            t0 = time.perf_counter()
            out = engine(x)
            if cuda:
                torch.cuda.synchronize()
            latency = (time.perf_counter() - t0) * 1e3
            del out, x
            stats = torch.cuda.memory_stats() if cuda else {}
            row = {k: float(stats[v]) if v in stats else math.nan for k, v in _STATS.items()}
            row.update(step=step, batch=b, first_of_batch=b not in seen, latency_ms=latency)
            seen.add(b)
            rows.append(row)
    finally:
        engine.close()
    df = pd.DataFrame(rows).assign(
        alloc_conf=str(alloc_conf), model=f"{model}:{float(width):g}", family=str(model),
        width=float(width), imgsz=cfg.imgsz, precision=cfg.precision.value,
        layout=cfg.layout.value, device=str(device), seed=int(seed),
        cudnn_benchmark=bool(cudnn_benchmark),
    )  # fmt: skip
    return df[list(COLUMNS)]


def child_main(argv: list[str] | None = None) -> None:
    """Entry of the child process :func:`pool_table` starts: ``argv`` is a JSON object of
    :func:`pool_rows`' keywords and the parquet path to write (``out``)."""
    args = json.loads((argv if argv is not None else sys.argv[1:])[0])
    out = args.pop("out")
    pool_rows(**args).to_parquet(out, index=False)


def _child_env(alloc_conf: str) -> dict:
    env = dict(os.environ)
    if alloc_conf == "default":
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    else:
        env["PYTORCH_CUDA_ALLOC_CONF"] = alloc_conf
    root = str(Path(__file__).resolve().parents[3])  # the folder holding the yolo_sm package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def pool_table(confs=ALLOC_CONFS, *, timeout_s: float = 300.0, **kwargs):
    """The ``memory_pool`` table: :func:`pool_rows` once per allocator configuration of
    ``confs`` (``default``, or a ``PYTORCH_CUDA_ALLOC_CONF`` value), each in a fresh Python
    process started with that configuration; ``kwargs`` go to :func:`pool_rows`."""
    import pandas as pd

    batch_sequence(  # bad sizes: one sentence here, not a child's traceback
        kwargs.get("forwards", 200), kwargs.get("batch_min", 1), kwargs.get("batch_max", 64)
    )
    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, conf in enumerate(confs):
            out = Path(tmp) / f"pool_{i}.parquet"
            arg = json.dumps({**kwargs, "alloc_conf": conf, "out": str(out)})
            code = "from yolo_sm.topics.memory.collect_pool import child_main; child_main()"
            try:
                done = subprocess.run(
                    [sys.executable, "-c", code, arg],
                    env=_child_env(conf),
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                )
            except subprocess.TimeoutExpired:
                raise UserError(
                    f"the memory pool run with {conf} took over {timeout_s:.0f} s"
                ) from None
            if done.returncode or not out.exists():
                tail = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
                raise UserError(f"the memory pool run with {conf} failed: {tail[0]}")
            frames.append(pd.read_parquet(out))
    return pd.concat(frames, ignore_index=True)

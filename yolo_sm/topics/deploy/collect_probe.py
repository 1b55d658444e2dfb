"""Where does a frames-to-boxes batch spend its time? Each stage of the detection pipeline alone
and synchronised, then whole batches with 1 and 3 in flight: median wall and GPU ms per stage."""

from __future__ import annotations

import math
import time

import yolo_sm.core.nms as N
import yolo_sm.core.pipeline as P
from yolo_sm.contract.errors import UserError
from yolo_sm.core.bench import (
    CPU_PIPELINE_ENGINE,
    PIPELINE_ENGINE,
    bench_model,
    bundled_frames,
)
from yolo_sm.core.engines import EngineConfig, build_engine

# stage names, in the order of the table
STAGES = (
    "h2d", "letterbox", "engine", "decode", "postprocess", "letterbox: compiled",
    "decode: compiled", "batch, 1 stream", "batch, 3 streams", "batch, graph, 1 stream",
    "batch, graph, 3 streams",
)  # fmt: skip
#: the stages a CPU does not time (torch.compile's letterbox and decode)
GPU_STAGES = ("letterbox: compiled", "decode: compiled")
#: candidates per frame of the graph pipeline's fixed-size NMS (PipelineConfig.nms_topk)
PROBE_TOPK = 1024


def probe_pipeline(
    family: str = "yolov8",
    width: float = 0.5,
    batch: int = 16,
    reps: int = 10,
    device: str = "cuda",
    imgsz: int = 640,
    frames: str = "bus",
    keep_state: bool = False,
):
    """Per stage of :data:`STAGES`: median ``wall_ms`` and ``gpu_ms`` over ``reps``. ``frames``:
    ``bus`` (NMS's worst case) or ``alternate`` (as the bench feeds); ``keep_state``: return
    ``(table, state)`` with the open engine."""
    import numpy as np
    import torch

    if frames not in ("bus", "alternate"):
        raise UserError(f"frames must be 'bus' or 'alternate', got {frames!r}")
    if batch < 1 or reps < 1:
        raise UserError("batch and reps must be at least 1")
    on_gpu = torch.device(device).type == "cuda"
    model = bench_model(family, width)
    if isinstance(model, BaseException):
        raise model
    photos = bundled_frames()
    pick = [photos[0]] * batch if frames == "bus" else [photos[i % 2] for i in range(batch)]
    stack = torch.from_numpy(np.stack(pick))
    if on_gpu:
        stack = stack.pin_memory()
    backend, precision, layout = PIPELINE_ENGINE if on_gpu else CPU_PIPELINE_ENGINE
    cfg = EngineConfig(
        backend=backend, precision=precision, layout=layout, batch=batch, imgsz=imgsz,
        device=device,
    )  # fmt: skip
    eng = build_engine(model, cfg)
    try:
        out, state = _probe(model, eng, stack, reps, on_gpu)
    except BaseException:
        eng.close()  # e.g. CUDA out of memory: the engine's graph and buffers go with it
        raise
    out = out.assign(
        family=family,
        width=float(width),
        batch=int(batch),
        imgsz=int(imgsz),
        engine=f"{backend}/{precision}/{layout}",
        frames=frames,
        reps=int(reps),
        nms=N.NMS_IMPL,
    )
    if keep_state:
        return out, state
    eng.close()
    return out


def _probe(model, eng, stack, reps: int, on_gpu: bool):
    """The stage rows of :func:`probe_pipeline` and the state it hands on."""
    import numpy as np
    import pandas as pd
    import torch

    pipe = P.DetectionPipeline(model, eng, P.PipelineConfig(streams=1))
    device = eng.config.device
    shape = tuple(stack.shape[1:3])
    rows: dict[str, dict] = {}

    def timed(name, fn):
        out = fn()  # warm-up (and the result)
        walls, gpus = [], []
        for _ in range(reps):
            if on_gpu:
                torch.cuda.synchronize()
                e0, e1 = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                e0.record()
            t0 = time.perf_counter()
            out = fn()
            if on_gpu:
                e1.record()
                torch.cuda.synchronize()
                gpus.append(e0.elapsed_time(e1))
            walls.append((time.perf_counter() - t0) * 1e3)
        rows[name] = dict(
            wall_ms=float(np.median(walls)), gpu_ms=float(np.median(gpus)) if gpus else math.nan
        )
        return out

    dev = timed("h2d", lambda: stack.to(device, non_blocking=True))
    x = timed("letterbox", lambda: pipe.preprocess(dev))
    raw = timed("engine", lambda: eng(x))
    y = timed("decode", lambda: pipe.decode(raw))
    pipe.reset_counts()
    timed("postprocess", lambda: pipe.postprocess(y, shape))
    candidates = pipe.counts["candidates"] / pipe.counts["frames"]
    boxes = pipe.counts["boxes"] / pipe.counts["frames"]

    if on_gpu:  # the two stages as the whole-batch graph runs them (pipeline.fused)
        timed("letterbox: compiled", lambda: pipe.preprocess(dev, compiled=True))
        timed("decode: compiled", lambda: pipe.decode(raw, compiled=True))
    # whole batches: the full NMS, then the whole batch in one CUDA graph per slot (with the
    # top-k NMS; on a CPU the same steps without a graph)
    for graph, streams in ((False, 1), (False, 3), (True, 1), (True, 3)):
        cfg = P.PipelineConfig(streams=streams, graph=graph, nms_topk=PROBE_TOPK * graph)
        p = P.DetectionPipeline(model, eng, cfg)
        for _ in p.run([stack] * streams):  # warm-up: streams, buffers, each slot's graph
            pass
        if on_gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in p.run([stack] * reps):
            pass
        if on_gpu:
            torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3 / reps
        name = f"batch, {'graph, ' if graph else ''}{streams} stream{'s' if streams > 1 else ''}"
        rows[name] = dict(wall_ms=wall, gpu_ms=math.nan)
    out = pd.DataFrame(
        [
            dict(stage=s, wall_ms=rows[s]["wall_ms"], gpu_ms=rows[s]["gpu_ms"])
            for s in STAGES
            if on_gpu or s not in GPU_STAGES
        ]
    )  # fmt: skip
    out = out.assign(candidates_per_frame=candidates, boxes_per_frame=boxes)
    return out, dict(model=model, engine=eng, pipe=pipe, frames=stack, decoded=y)

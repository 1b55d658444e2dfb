"""Where does a frames-to-boxes batch spend its time?

:func:`probe_pipeline` runs each stage of :class:`yolo_sm.core.pipeline.DetectionPipeline` on its
own, synchronised, ``reps`` times, on one batch of camera frames (pinned on a GPU): the copy to
the device, letterbox, the engine, the box decode and the post-processing (NMS and the copy back),
the post-processing again with its alternative NMS paths (same boxes), then whole batches
through the pipeline with 1 and with 3 batches in flight. One row per stage: median wall time
and (on a GPU) median CUDA-event time. The plan step kind ``probe`` writes it as a dataset
(one per width and batch, e.g. ``h200/probe_pipeline_w025_b64``) that notebook 10 reads, every
probe of a root, next to the bench's pipeline rows;
``tools/pipeline_probe.py`` adds a torch.profiler table of the same batches.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

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
from yolo_sm.core.timing import cuda_graph_of
from yolo_sm.core.triton_kernels import triton_interpret

#: candidates per frame of the probe's fixed-size NMS row (PipelineConfig.nms_topk)
PROBE_TOPK = 1024

# stage names, in the order of the table
STAGES = (
    "h2d",
    "letterbox",
    "engine",
    "decode",
    "postprocess",
    "postprocess: fixpoint in torch ops",
    "postprocess: torchvision nms per chunk",
    "postprocess: top-k buffers",
    "letterbox: compiled",
    "decode: compiled",
    "postprocess: top-k in one CUDA graph",
    "batch, 1 stream",
    "batch, 3 streams",
    "batch, graph, 1 stream",
    "batch, graph, 3 streams",
    "batch, graph: its graph's replay alone",
)
#: the stages a CPU does not time (torch.compile and the CUDA graphs of the whole-batch graph)
GPU_STAGES = (
    "letterbox: compiled",
    "decode: compiled",
    "postprocess: top-k in one CUDA graph",
    "batch, graph: its graph's replay alone",
)


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
    """One row per stage of :data:`STAGES` (``stage``, ``wall_ms``, ``gpu_ms``: medians over
    ``reps``; ``gpu_ms`` is NaN on a CPU), with the unit's columns. ``frames``: ``bus`` (every
    frame the bus photo, 1080x810: ~2,500 candidates per frame at width 0.5, NMS's worst case) or
    ``alternate`` (bus and zidane resized to the bus's shape, as the bench feeds). The engine is
    the bench's pipeline engine (a CUDA graph in fp16 NHWC on a GPU, eager fp32 on a CPU); the
    model has the bench's class prior. "batch, k streams" rows are the wall time of ``reps``
    batches through ``DetectionPipeline.run`` with k in flight, per batch. ``keep_state``:
    return ``(table, state)``, state a dict of the model, engine (open: the caller closes it),
    1-stream pipeline, pinned frames and decoded batch, for more measurements on them
    (``tools/pipeline_probe.py``)."""
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
    """The stage rows of :func:`probe_pipeline` (with the candidate and box counts) and the
    state it hands on with ``keep_state``."""
    from unittest import mock

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
    dets = timed("postprocess", lambda: pipe.postprocess(y, shape))
    candidates = pipe.counts["candidates"] / pipe.counts["frames"]
    boxes = pipe.counts["boxes"] / pipe.counts["frames"]

    def same_boxes(other) -> bool:
        def rows_sorted(d):  # the same boxes in any order within an image
            a = d.numpy()
            return a[np.lexsort(a.T[::-1])] if len(a) else a

        return len(other) == len(dets) and all(
            a.shape == b.shape and np.array_equal(rows_sorted(a), rows_sorted(b))
            for a, b in zip(dets, other, strict=True)
        )

    # the alternative NMS paths on the same decoded batch, side by side in this process: each
    # switch is set for its row and restored after it
    alternatives = {
        # no Triton step kernel cached: suppress_fixpoint uses the torch ops
        "postprocess: fixpoint in torch ops": mock.patch.dict(
            N._TRITON_SUPPRESS, {triton_interpret(): None}
        ),
        # no batch fits nms_matrix: torchvision's nms per chunk of whole images
        "postprocess: torchvision nms per chunk": mock.patch.object(N, "NMS_MATRIX_LIMIT", 0),
        # fixed-size buffers of each frame's PROBE_TOPK best candidates (the full NMS where
        # that is not exact)
        "postprocess: top-k buffers": mock.patch.object(
            pipe, "config", replace(pipe.config, nms_topk=PROBE_TOPK)
        ),
    }
    for name, switch in alternatives.items():
        with switch:
            alt = timed(name, lambda: pipe.postprocess(y, shape))
        rows[name]["same_result"] = same_boxes(alt)
    if on_gpu:  # the two stages as the whole-batch graph runs them (pipeline.fused)
        timed("letterbox: compiled", lambda: pipe.preprocess(dev, compiled=True))
        timed("decode: compiled", lambda: pipe.decode(raw, compiled=True))
        # the fixed-size NMS, scaling and packing as the graph replays them: no launch gaps
        with mock.patch.object(pipe, "config", replace(pipe.config, nms_topk=PROBE_TOPK)):
            nms_graph = cuda_graph_of(lambda: pipe._packed_topk(y, shape))
        timed("postprocess: top-k in one CUDA graph", nms_graph.replay)
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
        if on_gpu and graph and streams == 1:
            # the device work of one batch (letterbox to packed boxes), no copy, no host wait
            timed("batch, graph: its graph's replay alone", p._slot(0).graph.replay)
    out = pd.DataFrame(
        [
            dict(stage=s, wall_ms=rows[s]["wall_ms"], gpu_ms=rows[s]["gpu_ms"],
                 same_result=rows[s].get("same_result"))
            for s in STAGES
            if on_gpu or s not in GPU_STAGES
        ]
    )  # fmt: skip
    out = out.assign(candidates_per_frame=candidates, boxes_per_frame=boxes)
    return out, dict(model=model, engine=eng, pipe=pipe, frames=stack, decoded=y)

"""Where does a frames-to-boxes batch spend its time? (issue: fast engines, goal 4)

On the GPU: YOLOv8 (--width) with the bench's class prior, the CUDA-graph fp16 NHWC engine at
--batch, pinned 1080x810 frames (the bundled photos). Each stage of ``DetectionPipeline`` is run
on its own, synchronised, --reps times: host wall time and CUDA-event time per stage (median), the
candidate count NMS sees, then the same postprocess with alternative NMS layouts, and a
torch.profiler table of a few whole pipeline batches (top CPU ops and top CUDA kernels).
Writes JSON lines to --out and the profiler trace next to it.

    python3 tools/pipeline_probe.py --width 0.5 --batch 16 --out $OUT/pipeline_probe.jsonl
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv=None) -> int:
    import cv2
    import numpy as np
    import torch
    import torchvision

    from yolo_sm.engines import EngineConfig, build_engine
    from yolo_sm.images import bundled_images
    from yolo_sm.models import build_yolo
    from yolo_sm.pipeline import DetectionPipeline, PipelineConfig, set_class_prior

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    rows = [dict(torch=torch.__version__, torchvision=torchvision.__version__)]

    model = build_yolo("yolov8", a.width)
    set_class_prior(model, 0.001, spread=1.5)
    frames = [cv2.imread(str(f)) for f in bundled_images()]
    frames = [f for f in frames if f.shape == frames[0].shape]
    stack = torch.from_numpy(np.stack([frames[i % len(frames)] for i in range(a.batch)]))
    stack = stack.pin_memory()
    eng = build_engine(
        model, EngineConfig(backend="cudagraph", precision="fp16", layout="nhwc", batch=a.batch)
    )
    pipe = DetectionPipeline(model, eng, PipelineConfig(streams=1))
    shape = tuple(stack.shape[1:3])

    def timed(name, fn, reps=a.reps):
        out = fn()
        torch.cuda.synchronize()
        walls, gpus = [], []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            e0.record()
            out = fn()
            e1.record()
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
            gpus.append(e0.elapsed_time(e1))
        r = dict(stage=name, wall_ms=float(np.median(walls)), gpu_ms=float(np.median(gpus)))
        rows.append(r)
        print(f"{name:34s} wall {r['wall_ms']:8.3f} ms  gpu {r['gpu_ms']:8.3f} ms", flush=True)
        return out

    dev = timed("h2d", lambda: stack.to("cuda", non_blocking=True))
    x = timed("letterbox", lambda: pipe.preprocess(dev))
    raw = timed("engine", lambda: eng(x))
    y = timed("decode", lambda: pipe.decode(raw))
    scores, _ = y[:, 4:].max(1)
    n_cand = int((scores > pipe.config.conf).sum())
    rows.append(dict(stage="candidates", total=n_cand, per_image=n_cand / a.batch))
    print(f"candidates: {n_cand} ({n_cand / a.batch:.0f} per image)", flush=True)
    import yolo_sm.pipeline as P

    dets = timed("postprocess (nms_matrix)", lambda: pipe.postprocess(y, shape))
    rows.append(dict(stage="boxes", total=int(sum(len(d) for d in dets))))
    # the same postprocess with torchvision's nms in chunks of whole images (session 4's path),
    # side by side in this process; the boxes must be the same
    # nms_matrix with its fixed point in torch ops instead of the Triton step kernel
    kern = P._triton_suppress()
    P._TRITON_SUPPRESS[False] = None
    try:
        timed("postprocess (nms_matrix, torch fixpoint)", lambda: pipe.postprocess(y, shape))
    finally:
        P._TRITON_SUPPRESS[False] = kern
    limit, P.NMS_MATRIX_LIMIT = P.NMS_MATRIX_LIMIT, 0
    try:
        dets_tv = timed("postprocess (torchvision chunks)", lambda: pipe.postprocess(y, shape))
    finally:
        P.NMS_MATRIX_LIMIT = limit

    def rows_sorted(d):  # the same boxes in any order within an image
        a = d.numpy()
        return a[np.lexsort(a.T[::-1])] if len(a) else a

    same = len(dets) == len(dets_tv) and all(
        a.shape == b.shape and np.array_equal(rows_sorted(a), rows_sorted(b))
        for a, b in zip(dets, dets_tv, strict=True)
    )
    rows.append(dict(stage="boxes equal", equal=bool(same)))
    print(f"nms_matrix boxes == torchvision boxes: {same}", flush=True)
    timed("whole batch (streams=1)", lambda: list(pipe.run([stack])))

    # NMS alone on the candidates, as postprocess lays them out
    from torchvision.ops import nms

    keep = scores > pipe.config.conf
    bi, ai = keep.nonzero(as_tuple=True)
    boxes = y[bi, :4, ai]
    sc = scores[bi, ai]
    cl = y[:, 4:].max(1)[1][bi, ai]
    group = bi * pipe.nc + cl
    shifted = boxes.double() + (group.double() * 1e4)[:, None]
    timed("nms f64 one call", lambda: nms(shifted, sc.double(), 0.7))
    shifted32 = boxes.float() + (group.float() * 4096)[:, None]
    timed("nms f32 one call", lambda: nms(shifted32, sc.float(), 0.7))
    timed("nonzero (sync)", lambda: keep.nonzero(as_tuple=True))

    # the whole pipeline under torch.profiler
    from torch.profiler import ProfilerActivity, profile

    for _ in pipe.run([stack] * 3):
        pass
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in pipe.run([stack] * 5):
            pass
    torch.cuda.synchronize()
    ka = prof.key_averages()
    print(ka.table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=50))
    print(ka.table(sort_by="self_cuda_time_total", row_limit=14, max_name_column_width=50))
    prof.export_chrome_trace(a.out.replace(".jsonl", "_trace.json"))
    eng.close()
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where does a frames-to-boxes batch spend its time?

On the GPU: ``yolo_sm.topics.deploy.collect_probe.probe_pipeline`` (the plan step kind ``probe``:
each
stage of
``DetectionPipeline`` alone and synchronised, the post-processing with each NMS path, whole
batches with 1 and 3 streams) at --width / --batch, then, on the same engine and decoded batch,
torchvision's ``nms`` called once over the whole batch (the serial walk ``nms_matrix`` avoids)
and a torch.profiler table of a few whole pipeline batches (top CPU ops and top CUDA kernels).
Writes JSON lines to --out and the profiler trace next to it.

    python3 tools/pipeline_probe.py --width 0.5 --batch 16 --out $OUT/pipeline_probe.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from unittest import mock


def main(argv=None) -> int:
    import numpy as np
    import torch
    import torchvision

    from yolo_sm.topics.deploy.collect_probe import probe_pipeline

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--frames", default="bus", choices=("bus", "alternate"))
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    rows = [dict(torch=torch.__version__, torchvision=torchvision.__version__)]

    table, st = probe_pipeline(
        width=a.width, batch=a.batch, reps=a.reps, device="cuda", frames=a.frames, keep_state=True
    )
    u = table.iloc[0]
    print(
        f"candidates per frame {u.candidates_per_frame:.0f}, boxes per frame "
        f"{u.boxes_per_frame:.0f}, NMS {u.nms}",
        flush=True,
    )
    for r in table.itertuples():
        print(f"{r.stage:40s} wall {r.wall_ms:8.3f} ms  gpu {r.gpu_ms:8.3f} ms", flush=True)
        rows.append(dict(stage=r.stage, wall_ms=r.wall_ms, gpu_ms=r.gpu_ms))

    # torchvision's nms once over the whole batch: the pipeline's own torchvision path
    # (nms_torchvision, (image, class) groups kept apart by float64 offsets) with one chunk
    from ultralytics.utils import ops

    import yolo_sm.core.nms as N

    pipe, y = st["pipe"], st["decoded"]
    scores, cls = y[:, 4:].max(1)
    bi, ai = (scores > pipe.config.conf).nonzero(as_tuple=True)
    boxes, sc, cl = ops.xywh2xyxy(y[bi, :4, ai]), scores[bi, ai], cls[bi, ai]
    counts = torch.bincount(bi, minlength=y.shape[0]).tolist()
    walls = []
    with mock.patch.object(N, "NMS_CHUNK", len(bi)):  # every image in one call
        for _ in range(1 + max(3, a.reps // 4)):  # the first call: warm-up
            t0 = time.perf_counter()
            c = pipe.config
            N.nms_torchvision(boxes, sc, cl, bi, counts, c.iou, pipe.nc, c.agnostic)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
    walls = walls[1:]
    rows.append(dict(stage="torchvision nms, one call per batch", wall_ms=float(np.median(walls))))
    print(f"{rows[-1]['stage']:40s} wall {rows[-1]['wall_ms']:8.3f} ms", flush=True)

    # the whole pipeline under torch.profiler
    from torch.profiler import ProfilerActivity, profile

    stack = st["frames"]
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
    st["engine"].close()
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

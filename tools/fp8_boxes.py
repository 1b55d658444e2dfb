"""Do the fp8 engine's boxes agree with the fp16 engine's after NMS? (issue: fast engines, goal 3)

YOLOv8 (--width) with the bench's class prior (``pipeline.set_class_prior``, so NMS keeps real
detections rather than near-ties), an fp16 and an fp8 engine of the same backend, each wrapped in
``DetectionPipeline`` (same letterbox, decode and NMS), on the bundled photos (bus, zidane and
their mirror images, each frame shape its own batch). Reports, per photo: boxes kept by each,
the share of fp16 boxes with a same-class fp8 box at IoU >= 0.5 and >= 0.9 (and the reverse),
and the relative L2 error of the raw head output vs fp32 overall, for the box branch and for the
class logits (the overall figure mixes both: a class branch dominated by its constant bias
hides the error of the rest). On a GPU the fp8 engine runs cuDNN; on a CPU the exact emulation.

    python3 tools/fp8_boxes.py --width 1.0 --device cuda --out $OUT/fp8_boxes.json
"""

from __future__ import annotations

import argparse
import json


def main(argv=None) -> int:
    import cv2
    import numpy as np
    import torch

    from yolo_sm.collect.engines import EngineConfig, build_engine
    from yolo_sm.collect.engines.base import head_tensor, reference_output, relative_l2
    from yolo_sm.collect.images import bundled_images
    from yolo_sm.collect.models import build_yolo
    from yolo_sm.collect.pipeline import (
        DetectionPipeline,
        PipelineConfig,
        match_boxes,
        set_class_prior,
    )

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=float, default=1.0)
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--device", default="cuda", help="cuda (cuDNN fp8) or cpu (exact emulation)")
    p.add_argument("--backend", default=None, help="default: cudagraph on a GPU, eager on a CPU")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    gpu = a.device.startswith("cuda")
    backend = a.backend or ("cudagraph" if gpu else "eager")

    model = build_yolo("yolov8", a.width)
    set_class_prior(model, 0.001, spread=1.5)
    photos = [cv2.imread(str(f)) for f in bundled_images()]
    photos += [np.ascontiguousarray(f[:, ::-1]) for f in photos]  # mirrored: other boxes
    result = {"width": a.width, "imgsz": a.imgsz, "device": a.device, "backend": backend}
    engines, pipes = {}, {}
    for prec in ("fp16", "fp8"):
        cfg = EngineConfig(
            backend=backend,
            precision=prec,
            layout="nhwc",
            batch=1,
            imgsz=a.imgsz,
            device=a.device,
            check=False,  # the check's figure is reported below, per branch
        )
        engines[prec] = build_engine(model, cfg)
        pipes[prec] = DetectionPipeline(model, engines[prec], PipelineConfig(streams=1))
    rows = []
    nc = model.det.model[-1].nc
    for i, frame in enumerate(photos):
        boxes = {prec: pipes[prec](frame[None])[0] for prec in pipes}
        row = {"photo": i, "shape": list(frame.shape[:2])}
        for prec in pipes:
            row[f"boxes_{prec}"] = len(boxes[prec])
        for iou in (0.5, 0.9):
            row[f"fp16_found_by_fp8_iou{iou}"] = match_boxes(boxes["fp16"], boxes["fp8"], iou)
            row[f"fp8_found_by_fp16_iou{iou}"] = match_boxes(boxes["fp8"], boxes["fp16"], iou)
        # raw head output vs fp32, overall and per branch
        x = pipes["fp8"].preprocess(torch.from_numpy(frame[None].copy()).to(a.device))
        ref = reference_output(model, engines["fp8"].config, x)
        for prec in pipes:
            with torch.no_grad():
                out = head_tensor(engines[prec](x.to(engines[prec].input_dtype))).float().cpu()
            row[f"rel_err_{prec}"] = relative_l2(out, ref)
            row[f"rel_err_box_{prec}"] = relative_l2(out[:, :-nc], ref[:, :-nc])
            row[f"rel_err_cls_{prec}"] = relative_l2(out[:, -nc:], ref[:, -nc:])
        rows.append(row)
        print(json.dumps(row), flush=True)
    for e in engines.values():
        e.close()
    result["photos"] = rows
    for k in rows[0]:
        if k.startswith(("fp16_found", "fp8_found", "rel_err")):
            result[f"mean_{k}"] = float(np.mean([r[k] for r in rows]))
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "photos"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

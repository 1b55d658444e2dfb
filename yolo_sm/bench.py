"""Side-by-side benchmark (the fast-engines issue): for each model and batch size, the eager
fp16 NHWC baseline, each other engine, our end-to-end pipeline and ultralytics' own
``YOLO.predict``, measured in one run so the ratios are like for like.

Engine rows time the forward alone (the sweep's ``run_point``); ``pipeline`` and
``ultralytics_predict`` rows time frames to boxes (uint8 frames in, NMS-ed boxes on the host
out), so compare those two with each other and with ``model_only`` throughput.
"""

from __future__ import annotations

import time

from yolo_sm.errors import UserError

BASELINE = ("eager", "fp16", "nhwc")
DEFAULT_ENGINES = (("cudagraph", "fp16", "nhwc"), ("compile", "fp16", "nhwc"))


def run_bench(
    models,
    batches,
    *,
    engines=DEFAULT_ENGINES,
    device: str = "cuda",
    imgsz: int = 640,
    budget_ms: float = 300,
    pipeline_s: float = 2.0,
    predict: bool = True,
    frames=None,
    progress: bool = True,
):
    """One row per (model, batch, variant) with ``img_per_s`` and ``vs_baseline`` (throughput
    over the baseline's in this run). ``models``: (family, width) pairs; ``engines``: (backend,
    precision, layout) triples besides the baseline; a backend ``compile:MODE`` picks the
    torch.compile mode."""
    import pandas as pd
    from tqdm.auto import tqdm

    from yolo_sm.engines import EngineConfig, build_engine
    from yolo_sm.models import build_yolo, model_flops
    from yolo_sm.pipeline import DetectionPipeline, measure_pipeline, set_class_prior
    from yolo_sm.provenance import collect
    from yolo_sm.sweep import Point, SweepSpec, run_point

    if not models or not batches:
        raise UserError("bench needs at least one model and one batch size")
    frames = frames if frames is not None else _bundled_frames()
    spec = SweepSpec(device=device, budget_ms=budget_ms, warmup_ms=50)
    rows = []
    todo = [(m, b) for m in models for b in batches]
    for (family, width), batch in tqdm(todo, desc="bench", disable=not progress):
        model = build_yolo(family, width)
        set_class_prior(model, 0.001, spread=1.5)  # detections for NMS to do real work
        flops = model_flops(model, imgsz)
        for variant, precision, layout in (BASELINE, *engines):
            backend, _, mode = variant.partition(":")  # "compile:max-autotune-no-cudagraphs"
            p = Point(
                family,
                "",
                float(width),
                0.33,
                2048,
                precision,
                layout,
                backend,
                batch,
                imgsz,
                mode or "default",
                device,
            )
            r = run_point(model, p, spec, flops)
            rows.append(
                {
                    "family": family,
                    "width": width,
                    "batch": batch,
                    "variant": f"{variant}/{precision}/{layout}",
                    "scope": "model_only",
                    **{
                        k: r.get(k)
                        for k in (
                            "status",
                            "message",
                            "median_ms",
                            "iqr_ms",
                            "img_per_s",
                            "rel_err",
                            "tflops",
                        )
                    },
                }
            )
        cfg = EngineConfig(
            backend="cudagraph" if device.startswith("cuda") else "eager",
            precision="fp16" if device.startswith("cuda") else "fp32",
            layout="nhwc",
            batch=batch,
            imgsz=imgsz,
            device=device,
        )
        eng = build_engine(model, cfg)
        stats = measure_pipeline(DetectionPipeline(model, eng), frames, batch, pipeline_s)
        eng.close()
        rows.append(
            {
                "family": family,
                "width": width,
                "batch": batch,
                "variant": f"pipeline/{cfg.backend.value}/{cfg.precision.value}",
                "scope": "frames_to_boxes",
                "status": "ok",
                "median_ms": stats["latency_p50_ms"],
                "p99_ms": stats["latency_p99_ms"],
                "img_per_s": stats["frames_per_s"],
            }
        )
        if predict:
            rows.append(_predict_row(model, family, width, batch, frames, device, pipeline_s))
    df = pd.DataFrame(rows)
    base = df[df.variant == "/".join(BASELINE)].set_index(["family", "width", "batch"])
    key = df.set_index(["family", "width", "batch"]).index
    df["vs_baseline"] = df.img_per_s.to_numpy() / base.img_per_s.reindex(key).to_numpy()
    prov = collect(device)
    return df.assign(**{f"prov_{k}": v for k, v in prov.items()})


def _predict_row(model, family, width, batch, frames, device, seconds):
    """ultralytics ``YOLO.predict`` throughput on the same frames and weights (its own
    pre-processing, fp16 on a GPU, NMS and Results objects)."""
    import copy

    import numpy as np
    from ultralytics import YOLO

    det = copy.deepcopy(model.det)
    det.model[-1].training = False
    yolo = YOLO("yolov8n.yaml", task="detect", verbose=False)
    yolo.model = det
    half = device.startswith("cuda")
    batch_frames = [frames[i % len(frames)] for i in range(batch)]
    kw = dict(imgsz=640, device=device, half=half, verbose=False, rect=False)
    yolo.predict(batch_frames, **kw)  # warm-up (model set-up, cuDNN autotuning)
    lat, n, t0 = [], 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or not lat:
        t = time.perf_counter()
        yolo.predict(batch_frames, **kw)
        lat.append(time.perf_counter() - t)
        n += batch
    wall = time.perf_counter() - t0
    return {
        "family": family,
        "width": width,
        "batch": batch,
        "variant": "ultralytics_predict",
        "scope": "frames_to_boxes",
        "status": "ok",
        "median_ms": float(np.median(lat)) * 1e3,
        "p99_ms": float(np.quantile(lat, 0.99)) * 1e3,
        "img_per_s": n / wall,
    }


def _bundled_frames():
    import cv2

    from yolo_sm.images import bundled_images

    frames = [cv2.imread(str(p)) for p in bundled_images()]
    h, w = frames[0].shape[:2]
    return [f if f.shape[:2] == (h, w) else cv2.resize(f, (w, h)) for f in frames]

"""Numerical error of the reduced precisions: raw head output against eager fp32 on random inputs
and the bundled photos, and boxes after NMS against a reference precision (step ``numerics``)."""

from __future__ import annotations

from yolo_sm.contract.vocab import INT8_CALIBRATIONS, INT8_PERCENTILE
from yolo_sm.core.bench import CLASS_PRIOR
from yolo_sm.core.engines import EngineConfig, build_engine, int8
from yolo_sm.core.engines.base import as_input, reference_output, relative_l2
from yolo_sm.core.engines.fp8 import choose_kernel
from yolo_sm.core.images import bundled_images
from yolo_sm.core.models import build_yolo
from yolo_sm.core.models.common import calibration_batches
from yolo_sm.core.pipeline import DetectionPipeline, match_boxes, set_class_prior


def variants(precisions, int8_calibrations=INT8_CALIBRATIONS) -> list[tuple[str, str]]:
    """(precision, calibration) pairs: ``int8`` once per calibration, the others with ""."""
    out = []
    for p in precisions:
        if str(p) == "int8":
            out += [("int8", str(c)) for c in int8_calibrations]
        else:
            out.append((str(p), ""))
    return list(dict.fromkeys(out))


def _engines(model, pairs, **kw):
    """(precision, calibration columns, config, engine) per (precision, calibration) of
    ``pairs``, unchecked; each engine closed once the caller moves on."""
    for prec, cal in pairs:
        cfg = EngineConfig(precision=prec, int8_calibration=cal or "max", check=False, **kw)
        pct = float(cfg.int8_percentile) if cal == "percentile" else float("nan")
        eng = build_engine(model, cfg)
        try:
            yield prec, {"calibration": cal, "int8_percentile": pct}, cfg, eng
        finally:
            eng.close()


def numerical_errors(
    model,
    precisions=("fp32", "fp16", "bf16"),
    *,
    layout="nhwc",
    batch=2,
    imgsz=128,
    device="cpu",
    seeds=(1, 2, 3),
    int8_calibrations=INT8_CALIBRATIONS,
    int8_percentile=INT8_PERCENTILE,
):
    """Relative L2 error of each precision's raw head output against eager fp32, per seed (fresh
    random inputs each)."""
    import pandas as pd

    rows = []
    pairs = variants(precisions, int8_calibrations)
    kw = dict(layout=layout, batch=batch, imgsz=imgsz, device=device)
    for prec, cols, cfg, eng in _engines(model, pairs, int8_percentile=int8_percentile, **kw):
        for seed in seeds:
            x = eng.make_input(seed)
            err = relative_l2(eng(x), reference_output(model, cfg, x, seed))
            row = {"precision": prec, "seed": seed, "device": device, "rel_err": err}
            rows.append({**row, "tolerance": cfg.tolerance, **cols})
    return pd.DataFrame(rows)


def box_agreement(
    model,
    precisions=("fp32", "fp8"),
    *,
    reference="fp16",
    imgsz=320,
    device="cpu",
    layout="nhwc",
    iou_min=0.9,
    int8_calibrations=INT8_CALIBRATIONS,
    int8_percentile=INT8_PERCENTILE,
):
    """Boxes after NMS of each precision against ``reference`` on the same frames: per frame, box
    counts and the share with a same-class partner at IoU >= ``iou_min`` each way."""
    import cv2
    import numpy as np
    import pandas as pd

    frames = [cv2.imread(str(p)) for p in bundled_images()]
    ref = (str(reference), "max" if str(reference) == "int8" else "")
    pairs = [ref, *(v for v in variants(precisions, int8_calibrations) if v != ref)]
    kw = dict(layout=layout, batch=1, imgsz=imgsz, device=device, int8_percentile=int8_percentile)
    boxes = {}
    for prec, cols, _, eng in _engines(model, pairs, **kw):
        pipe = DetectionPipeline(model, eng)
        found = [pipe(np.ascontiguousarray(f)[None])[0] for f in frames]
        boxes[(prec, cols["calibration"])] = found, cols
    rows = []
    for (prec, _), (found, cols) in list(boxes.items())[1:]:
        for i, (a, r) in enumerate(zip(found, boxes[ref][0], strict=True)):
            row = {"precision": prec, **cols, "reference": reference, "frame": i}
            row.update(boxes=len(a), reference_boxes=len(r), matched=match_boxes(a, r, iou_min))
            rows.append({**row, "reference_matched": match_boxes(r, a, iou_min)})
    return pd.DataFrame(rows)


def photo_errors(
    model,
    precisions=("fp16", "bf16", "fp8"),
    *,
    imgsz=320,
    layout="nhwc",
    class_prior=False,
    device="cpu",
    int8_calibrations=INT8_CALIBRATIONS,
    int8_percentile=INT8_PERCENTILE,
):
    """Relative L2 error of each precision's raw head output against eager fp32 on the bundled
    photos; ``class_prior``: of a copy with the bench's class prior."""
    import copy

    import pandas as pd

    if class_prior:
        model = copy.deepcopy(model)
        set_class_prior(model, *CLASS_PRIOR)
    x = calibration_batches(imgsz)[0]
    rows = []
    pairs = variants(precisions, int8_calibrations)
    kw = dict(layout=layout, batch=len(x), imgsz=imgsz, device=device)
    for prec, cols, cfg, eng in _engines(model, pairs, int8_percentile=int8_percentile, **kw):
        ref = reference_output(model, cfg, x.to(device))
        row = {"precision": prec, "imgsz": imgsz, "device": device}
        row.update(class_prior=bool(class_prior), rel_err=relative_l2(eng(as_input(x, cfg)), ref))
        rows.append({**row, **cols, **_quant_counts(eng)})
    return pd.DataFrame(rows)


def _quant_counts(eng) -> dict:
    """int8 engines: how their int8 convolutions ran (:func:`int8.graph_counts`)."""
    m = eng.module
    if m is None or not hasattr(m, "int8_info"):
        return {}
    c = int8.graph_counts(m)
    return {
        "quant_convs": c["int8_convs"],
        "quant_fallbacks": c["fp16"],
        "unfused_convs": c["unfused"],
    }


def numerics_table(
    widths=(0.25, 0.5),
    family="yolov8",
    *,
    precisions=("fp16", "bf16"),
    photo_precisions=("fp16", "bf16", "fp8"),
    box_precisions=("fp32", "bf16", "fp8"),
    box_reference="fp16",
    imgsz=128,
    photo_imgsz=320,
    batch=2,
    seeds=(1, 2, 3),
    layout="nhwc",
    device="cpu",
    int8_calibrations=INT8_CALIBRATIONS,
    int8_percentile=INT8_PERCENTILE,
    class_priors=(False, True),
):
    """Tidy ``numerics`` table per width of ``family``, by ``input`` (random / photo) and
    ``metric`` (rel_err / boxes); int8 once per calibration."""
    import copy

    import pandas as pd

    run = {"layout": layout, "device": device, "int8_percentile": int8_percentile}
    run["int8_calibrations"] = tuple(int8_calibrations)
    frames = []
    for w in widths:
        model = build_yolo(family, w)
        common = {"family": family, "width": float(w), "layout": layout, "device": device}
        rel = {"metric": "rel_err", "reference": "fp32", **common}
        random = numerical_errors(
            model, ("fp32", *precisions), batch=batch, imgsz=imgsz, seeds=seeds, **run
        )
        frames.append(
            random.assign(input="random", imgsz=imgsz, batch=batch, class_prior=False, **rel)
        )
        for prior in class_priors:
            photo = photo_errors(
                model, photo_precisions, imgsz=photo_imgsz, class_prior=bool(prior), **run
            )
            frames.append(photo.assign(input="photo", batch=4, **rel))
        primed = copy.deepcopy(model)
        set_class_prior(primed, *CLASS_PRIOR)
        boxes = box_agreement(
            primed, box_precisions, reference=box_reference, imgsz=photo_imgsz, **run
        )
        frames.append(
            boxes.assign(input="photo", metric="boxes", imgsz=photo_imgsz, batch=1,
                         class_prior=True, **common)
        )  # fmt: skip
    out = pd.concat(frames, ignore_index=True)
    out = out.astype(dict.fromkeys(("seed", "frame", "boxes", "reference_boxes"), "Int64"))
    fp8 = out.precision.eq("fp8")
    out["fp8_kernel"] = fp8.map({True: choose_kernel(device), False: ""}) if fp8.any() else ""
    if "calibration" in out:
        is8 = out.precision.eq("int8")
        kernel = int8.choose_kernel(device) if is8.any() else ""
        out["int8_kernel"] = is8.map({True: kernel, False: ""})
    lead = "input metric family width precision reference layout imgsz batch class_prior device"
    lead = lead.split()
    return out[lead + [c for c in out.columns if c not in lead]]

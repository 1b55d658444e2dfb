"""Technique 2 of :mod:`yolo_sm.topics.techniques.collect`: ``torch.autocast`` on the fp32 model
against the model cast to the 16-bit type, and which module calls autocast leaves in fp32."""

from __future__ import annotations

import torch

from yolo_sm.core.engines.base import photo_input, reference_output
from yolo_sm.core.engines.torch_backends import prepare_module
from yolo_sm.core.models import build_yolo
from yolo_sm.topics.techniques.collect_run import (
    BACKENDS,
    TORCH_DTYPES,
    config,
    forward_point,
    low_precision,
    on_gpu,
    point,
)

AUTOCAST_VARIANTS = ("autocast", "half_model")
LOW_DTYPES = ("float16", "bfloat16")
RECORD = ("layer", "module_type", "input_dtype", "output_dtype")


def _dtype_name(v) -> str:
    """The dtype of the first tensor in ``v`` (nested lists, tuples, dicts), "" without one."""
    from torch.utils._pytree import tree_leaves

    t = next((x for x in tree_leaves(v) if isinstance(x, torch.Tensor)), None)
    return str(t.dtype).replace("torch.", "") if t is not None else ""


def output_dtypes(model, x, device_type: str, dtype) -> list[dict]:
    """One record per module call of ``model(x)`` under ``torch.autocast(device_type, dtype)``
    (forward hooks on every submodule): layer name, module type, and the dtypes of its first
    input and first output tensor."""
    records = []

    def hook(name):
        def fn(mod, args, out):
            kind, dtypes = type(mod).__name__, (_dtype_name(args), _dtype_name(out))
            records.append(dict(zip(RECORD, (name, kind, *dtypes), strict=True)))

        return fn

    hooks = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if n]
    try:
        with torch.no_grad(), torch.autocast(device_type, dtype=dtype, cache_enabled=False):
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return records


def dtype_summary(records: list[dict]) -> list[dict]:
    """Per module type (sorted): ``calls``, ``fp32_output_calls`` (output float32) and
    ``upcast_calls`` (a 16-bit input and a float32 output: autocast ran the op in fp32)."""
    import pandas as pd

    d = pd.DataFrame(records, columns=["module_type", "input_dtype", "output_dtype"])
    fp32 = d.output_dtype == "float32"
    d = d.assign(calls=1, fp32_output_calls=fp32.astype(int),
                 upcast_calls=(fp32 & d.input_dtype.isin(LOW_DTYPES)).astype(int))  # fmt: skip
    g = d.groupby("module_type")[["calls", "fp32_output_calls", "upcast_calls"]].sum()
    return [{"module_type": t, **{k: int(v) for k, v in r.items()}} for t, r in g.iterrows()]


def yolo(width, models: dict | None = None):
    """YOLOv8 at ``width``, built once per ``models`` cache."""
    models = {} if models is None else models
    if float(width) not in models:
        models[float(width)] = build_yolo("yolov8", float(width))
    return models[float(width)]


def autocast_rows(
    *,
    widths=(0.5, 1.0),
    batches=(16, 64),
    backends=BACKENDS,
    imgsz=640,
    device="cuda",
    warmup_ms=30.0,
    budget_ms=150.0,
    profile_iters=2,
    models: dict | None = None,
) -> list[dict]:
    """Per YOLOv8 width: the dtype record of one autocast forward on the photos (technique
    ``autocast_dtypes``, batch 2), then per batch, backend and variant a forward point against
    eager fp32 on the photos (the half model sees them rounded to 16 bits)."""
    prec = low_precision(device)
    device_type = "cuda" if on_gpu(device) else "cpu"
    rows = []
    for width in widths:
        model = yolo(width, models)
        head = {"model": f"yolov8:{float(width):g}", "family": "yolov8", "width": float(width),
                "imgsz": imgsz, "precision": prec.value, "layout": "nhwc",
                "device": device}  # fmt: skip
        cfg32 = config(device, 2, imgsz, "fp32")
        m32 = prepare_module(model, cfg32)
        records = output_dtypes(m32, photo_input(cfg32), device_type, TORCH_DTYPES[prec])
        del m32
        rows += [{**head, "technique": "autocast_dtypes", "variant": "autocast", "backend": "eager",
                  "scope": "dtypes", "batch": 2, "status": "ok", "message": "", **s}
                 for s in dtype_summary(records)]  # fmt: skip
        for batch in batches:
            cfg32 = config(device, batch, imgsz, "fp32")
            ref = reference_output(model, cfg32, photo_input(cfg32))
            for backend in backends:
                cfg = config(device, batch, imgsz, prec, backend)
                for variant in AUTOCAST_VARIANTS:
                    row = {**head, "technique": "autocast", "variant": variant, "backend": backend,
                           "scope": "forward", "batch": batch}  # fmt: skip
                    auto = prec if variant == "autocast" else None
                    args = (model, cfg, ref, auto, warmup_ms, budget_ms, profile_iters)
                    rows.append(point(row, forward_point, *args))
    return rows

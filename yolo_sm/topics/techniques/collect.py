"""Three techniques measured side by side in one process (table kind ``techniques``, one row
per variant, backend and batch): ``fusion`` (ResNet with BatchNorm kept, folded, and conv +
bias + residual add + ReLU fused), ``autocast`` (the fp32 YOLO model under ``torch.autocast``
against the model cast to 16 bits, plus the ``autocast_dtypes`` record) and ``batch_buffer``
(a new ``torch.stack`` per step against a buffer allocated once, the assembly alone and with
the forward). The 16-bit type is fp16 on a GPU, bf16 on a CPU; CUDA graphs need a GPU.
"""

from __future__ import annotations

import torch

from yolo_sm.contract.errors import UserError
from yolo_sm.core.engines.base import photo_input, reference_output
from yolo_sm.core.models import resnet_backbone
from yolo_sm.core.models.fused import ConvAddReLU, ConvReLU, count_modules, fold_bn, fuse_conv_relu
from yolo_sm.topics.techniques.collect_autocast import (
    autocast_rows,
)
from yolo_sm.topics.techniques.collect_buffer import buffer_rows
from yolo_sm.topics.techniques.collect_run import (
    BACKENDS,
    config,
    forward_point,
    low_precision,
    point,
)

TECHNIQUES = ("fusion", "autocast", "batch_buffer")
FUSION_VARIANTS = ("bn_unfused", "bn_folded", "conv_bias_relu")

#: the residual branches' scale of the fusion technique's ResNet
#: (:func:`yolo_sm.core.models.resnet.resnet_backbone`): at 1.0 its fp16 forward lies ~0.4
#: from fp32 and every variant fails the fp16 check; 0.2 brings bf16 within 0.01 on a CPU
RESIDUAL_SCALE = 0.2


def fusion_models(depth: int = 101, residual_scale: float = RESIDUAL_SCALE) -> dict:
    """The three ResNet detectors of the fusion technique, same weights: BatchNorm kept,
    BatchNorm folded into the convolutions, and conv + bias + ReLU (+ residual add) fused; each
    residual branch scaled by ``residual_scale`` so that the 16-bit variants pass their
    numerical check (the kernels and their work are those of the unscaled network)."""
    unfused = resnet_backbone(depth, fuse=False, residual_scale=residual_scale)
    folded = fold_bn(unfused)
    return {"bn_unfused": unfused, "bn_folded": folded, "conv_bias_relu": fuse_conv_relu(folded)}


def fusion_rows(
    *,
    depth=101,
    imgsz=640,
    batches=(1, 16, 64),
    backends=BACKENDS,
    device="cuda",
    warmup_ms=30.0,
    budget_ms=150.0,
    profile_iters=2,
) -> list[dict]:
    """One row per (batch, backend, variant) of the ResNet-``depth`` detector in the 16-bit
    type, NHWC; ``rel_err`` against the unfused model's eager fp32 output on the photos."""
    prec = low_precision(device)
    models = fusion_models(depth)
    bn = {v: count_modules(m, torch.nn.BatchNorm2d) for v, m in models.items()}
    fused = {
        v: count_modules(m, ConvReLU) + count_modules(m, ConvAddReLU) for v, m in models.items()
    }
    rows = []
    for batch in batches:
        cfg32 = config(device, batch, imgsz, "fp32")
        ref = reference_output(models["bn_unfused"], cfg32, photo_input(cfg32))
        for backend in backends:
            cfg = config(device, batch, imgsz, prec, backend)
            for variant, model in models.items():
                row = {"technique": "fusion", "model": f"resnet{depth}", "family": f"resnet{depth}",
                       "width": 1.0, "variant": variant, "backend": backend, "scope": "forward",
                       "batch": batch, "imgsz": imgsz, "precision": prec.value, "layout": "nhwc",
                       "device": device, "bn_modules": bn[variant],
                       "fused_conv_modules": fused[variant]}  # fmt: skip
                args = (model, cfg, ref, None, warmup_ms, budget_ms, profile_iters)
                rows.append(point(row, forward_point, *args))
    return rows


def techniques_table(
    *,
    techniques=TECHNIQUES,
    device="cuda",
    backends=BACKENDS,
    warmup_ms=30.0,
    budget_ms=150.0,
    profile_iters=2,
    resnet_depth=101,
    resnet_imgsz=640,
    resnet_batches=(1, 16, 64),
    widths=(0.5, 1.0),
    autocast_batches=(16, 64),
    buffer_width=0.5,
    buffer_batches=(16, 64),
    imgsz=640,
):
    """The ``techniques`` table: the rows of each technique asked for, in one process."""
    import pandas as pd

    unknown = sorted(set(techniques) - set(TECHNIQUES))
    if unknown:
        raise UserError(
            f"unknown technique(s) {', '.join(unknown)}: choose {', '.join(TECHNIQUES)}"
        )
    bad = sorted(set(backends) - set(BACKENDS))
    if bad:
        raise UserError(f"techniques run the backends {', '.join(BACKENDS)}, not {', '.join(bad)}")
    common = dict(backends=tuple(backends), device=device, warmup_ms=warmup_ms, budget_ms=budget_ms)
    models: dict = {}  # YOLOv8 per width, shared by autocast and the batch buffer
    rows = []
    if "fusion" in techniques:
        rows += fusion_rows(depth=resnet_depth, imgsz=resnet_imgsz, batches=tuple(resnet_batches),
                            profile_iters=profile_iters, **common)  # fmt: skip
    if "autocast" in techniques:
        rows += autocast_rows(widths=tuple(widths), batches=tuple(autocast_batches), imgsz=imgsz,
                              profile_iters=profile_iters, models=models, **common)  # fmt: skip
    if "batch_buffer" in techniques:
        rows += buffer_rows(
            width=buffer_width, batches=tuple(buffer_batches), imgsz=imgsz, models=models, **common
        )
    df = pd.DataFrame(rows)
    if "samples_ms" in df:  # failed rows have no samples: None, not NaN, in a list column
        df["samples_ms"] = df["samples_ms"].map(lambda v: list(v) if isinstance(v, list) else None)
    for c in ("static_buffer", "graph_input_copy", "noisy", "l2_flush"):
        if c in df:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df

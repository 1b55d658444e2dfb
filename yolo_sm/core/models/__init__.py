"""Model builders: YOLO families at any width/depth, the wide conv stack, ResNet backbones and a
user's model (:mod:`.spec`). Built-in models: random weights, eval, Conv+BN fused, one output
tensor (the head's), layers named (``model.4 C2f``) via :func:`layers`.
"""

from __future__ import annotations

from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models.checkpoint import load_checkpoint, read_checkpoint
from yolo_sm.core.models.common import (
    MAX_WIDTH,
    MIN_WIDTH,
    LayerRef,
    calibrate_bn,
    calibration_batches,
    is_number,
)
from yolo_sm.core.models.resnet import ResNetDetector, resnet_backbone
from yolo_sm.core.models.spec import (
    ModelSpec,
    build_spec,
    parse_model,
    parse_models,
    save_checkpoint,
)
from yolo_sm.core.models.tables import channel_table, layers, model_flops, width_summary
from yolo_sm.core.models.wide import WideConvStack, wide_conv_stack
from yolo_sm.core.models.yolo import FAMILIES, YoloForward, build_yolo, preset

__all__ = [
    "FAMILIES",
    "MAX_WIDTH",
    "MIN_WIDTH",
    "LayerRef",
    "ModelSpec",
    "ResNetDetector",
    "WideConvStack",
    "YoloForward",
    "build",
    "build_spec",
    "build_yolo",
    "calibrate_bn",
    "calibration_batches",
    "channel_table",
    "layers",
    "load_checkpoint",
    "model_flops",
    "parse_model",
    "parse_models",
    "preset",
    "read_checkpoint",
    "resnet_backbone",
    "save_checkpoint",
    "wide_conv_stack",
    "width_summary",
    "is_number",
]


def build(family, width: float | str | None = None, **kw) -> nn.Module:
    """Any model by family: ``yolov8``/``yolo11`` (``width`` multiplier or preset letter),
    ``wide`` (width factor), ``resnet18``..``resnet152``; ``kw`` for YOLO only. A
    :class:`ModelSpec` or spec text without ``width`` goes to :func:`build_spec`."""
    if isinstance(family, ModelSpec) or (width is None and not str(family).isalnum()):
        return build_spec(family, **kw)
    width = 1.0 if width is None else width
    fam = str(family).lower()
    if fam == "wide":
        return wide_conv_stack(float(width))
    if fam.startswith("resnet"):
        try:
            depth = int(fam[6:] or 101)
        except ValueError:
            raise UserError(f"unknown family {family!r}: use resnet18/34/50/101/152") from None
        return resnet_backbone(depth)
    return build_yolo(fam, width, **kw)

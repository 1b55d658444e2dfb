"""Model builders: YOLO families at any width/depth, the wide conv stack, ResNet backbones and a
user's model (:mod:`.spec`). Built-in models: random weights, eval, Conv+BN fused, one output
tensor (the head's), layers named (``model.4 C2f``) via :func:`layers`.
"""

from __future__ import annotations

from yolo_sm.core.models.checkpoint import load_checkpoint, read_checkpoint
from yolo_sm.core.models.common import MAX_WIDTH, MIN_WIDTH, hooked
from yolo_sm.core.models.resnet import ResNetDetector, resnet_backbone
from yolo_sm.core.models.spec import (
    ModelSpec,
    build,
    build_spec,
    parse_model,
    parse_models,
    save_checkpoint,
)
from yolo_sm.core.models.tables import channel_table, layers, model_flops
from yolo_sm.core.models.wide import wide_conv_stack
from yolo_sm.core.models.yolo import FAMILIES, YoloForward, build_yolo, preset

__all__ = [
    "FAMILIES",
    "MAX_WIDTH",
    "MIN_WIDTH",
    "ModelSpec",
    "ResNetDetector",
    "YoloForward",
    "build",
    "build_spec",
    "build_yolo",
    "channel_table",
    "hooked",
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
]

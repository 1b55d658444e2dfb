"""Shared pieces of the model builders: layer references and BatchNorm calibration."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from yolo_sm.core.images import load_images

MIN_WIDTH, MAX_WIDTH = 0.0625, 4.0


@dataclass(frozen=True)
class LayerRef:
    """One layer of a model as the tables name it."""

    index: int
    name: str  # module path, e.g. "model.4" or "layer3"
    module_type: str  # e.g. "C2f", "Conv", "Bottleneck"
    stage: str  # backbone / neck / head
    module: nn.Module
    requested_channels: float | None = None  # width-scaled channels before rounding and cap
    capped: bool = False  # ultralytics' max_channels cap lowered this layer's width
    # channels after the cap, before rounding up to a multiple of 8 (min(yaml, cap) x width)
    capped_channels: float | None = None


def calibration_batches(imgsz: int = 160, seed: int = 0) -> list[torch.Tensor]:
    """Inputs for :func:`calibrate_bn`: the two bundled photos letterboxed, plain and mirrored,
    then uniform noise in [0, 1): two batches of four."""

    real = torch.from_numpy(load_images(None, imgsz))
    gen = torch.Generator().manual_seed(seed + 1)
    noise = torch.rand(4, 3, imgsz, imgsz, generator=gen)
    return [torch.cat([real, real.flip(3)]), noise]


def calibrate_bn(
    model: nn.Module, batches: list[torch.Tensor] | None = None, seed: int = 0
) -> nn.Module:
    """Set every BatchNorm's running statistics from the calibration forwards (default
    :func:`calibration_batches`), as in a trained network; weights untouched, mode restored."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model
    was_training = model.training
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative moving average over the calibration forwards
    model.train()
    with torch.no_grad():
        for x in batches if batches is not None else calibration_batches(seed=seed):
            model(x)
    model.train(was_training)
    return model


def is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True

"""The wide conv stack: Conv3x3+BN+SiLU blocks scaled by a width factor."""

from __future__ import annotations

import torch
from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models.common import MAX_WIDTH, LayerRef, calibrate_bn, frozen
from yolo_sm.core.offline import prepare_ultralytics


class WideConvStack(nn.Module):
    """Conv3x3+BN+SiLU blocks (ultralytics ``Conv``) of ``int(base * width_factor)`` channels,
    each stage opening with a stride-2 block."""

    def __init__(self, width_factor, base_channels, blocks_per_stage, in_channels):
        super().__init__()
        prepare_ultralytics()
        from ultralytics.nn.modules import Conv

        blocks, self._stages = [], []
        c_in = in_channels
        for s, base in enumerate(base_channels):
            c_out = int(base * width_factor)
            for b in range(blocks_per_stage):
                blocks.append(Conv(c_in, c_out, 3, 2 if b == 0 else 1))
                self._stages.append(f"stage{s}")
                c_in = c_out
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x):
        return self.blocks(x)

    def layer_refs(self) -> list[LayerRef]:
        return [
            LayerRef(i, f"blocks.{i}", "WideConvBlock", self._stages[i], m)
            for i, m in enumerate(self.blocks)
        ]


def wide_conv_stack(
    width_factor: float = 1.0,
    base_channels: tuple[int, ...] = (64, 128, 256, 512),
    blocks_per_stage: int = 2,
    in_channels: int = 3,
    fuse: bool = True,
    seed: int = 0,
) -> WideConvStack:
    """The wide conv stack, random weights, BN calibrated then folded into each conv, eval:
    isolates width from the rest of YOLO."""
    if not (0 < width_factor <= MAX_WIDTH):
        raise UserError(f"width_factor must be in (0, {MAX_WIDTH}], got {width_factor}")
    if blocks_per_stage < 1 or not base_channels:
        raise UserError("wide_conv_stack needs at least one stage and one block per stage")
    torch.manual_seed(seed)
    stack = WideConvStack(width_factor, tuple(base_channels), blocks_per_stage, in_channels)
    calibrate_bn(stack, seed=seed)
    from ultralytics.utils.torch_utils import fuse_conv_and_bn  # after prepare_ultralytics

    for conv in stack.blocks if fuse else ():
        conv.conv = fuse_conv_and_bn(conv.conv, conv.bn)  # as DetectionModel.fuse does
        delattr(conv, "bn")
        conv.forward = conv.forward_fuse
    return frozen(stack)

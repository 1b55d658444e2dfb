"""torchvision ResNet backbones with a small detection head."""

from __future__ import annotations

import torch
from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models.common import LayerRef, calibrate_bn, frozen
from yolo_sm.core.models.fused import fold_bn


class ResNetDetector(nn.Module):
    """A torchvision ResNet trunk with a small detection head on the stride-32 map (3x3 conv to
    256 + ReLU, ``anchors*(4+nc)`` logits); returns (B, 4+nc, anchors*H*W)."""

    STAGES = ("stem", "layer1", "layer2", "layer3", "layer4", "head")

    def __init__(self, trunk: nn.Module, nc: int, anchors: int):
        super().__init__()
        self.stem = nn.Sequential(trunk.conv1, trunk.bn1, trunk.relu, trunk.maxpool)
        for name in self.STAGES[1:5]:
            setattr(self, name, getattr(trunk, name))
        c5 = trunk.fc.in_features
        self.nc, self.anchors = nc, anchors
        self.head = nn.Sequential(
            nn.Conv2d(c5, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, anchors * (4 + nc), 1),
        )

    def forward(self, x):
        for name in self.STAGES:
            x = getattr(self, name)(x)
        b, _, h, w = x.shape
        return (
            x.view(b, self.anchors, 4 + self.nc, h * w).transpose(1, 2).reshape(b, 4 + self.nc, -1)
        )

    def layer_refs(self) -> list[LayerRef]:
        mods = [(n, getattr(self, n)) for n in self.STAGES]
        return [
            LayerRef(i, n, type(m).__name__, "head" if n == "head" else "backbone", m)
            for i, (n, m) in enumerate(mods)
        ]


def resnet_backbone(
    depth: int = 101,
    nc: int = 1,
    anchors: int = 2,
    fuse: bool = True,
    seed: int = 0,
    residual_scale: float = 1.0,
) -> ResNetDetector:
    """torchvision ResNet-``depth`` (18..152), random weights, BN folded, with a small detection
    head. ``residual_scale`` scales the last BatchNorm of every residual block (damps the
    branch; 1.0: 16-bit output 0.4-0.9 off fp32)."""
    import torchvision
    from torchvision.models.resnet import BasicBlock, Bottleneck

    if depth not in (18, 34, 50, 101, 152):
        raise UserError(f"ResNet depth must be one of 18, 34, 50, 101, 152, got {depth}")
    torch.manual_seed(seed)
    trunk = getattr(torchvision.models, f"resnet{depth}")(weights=None)
    calibrate_bn(trunk, seed=seed)
    with torch.no_grad():
        for m in trunk.modules():
            if isinstance(m, (Bottleneck, BasicBlock)) and residual_scale != 1.0:
                bn = m.bn3 if isinstance(m, Bottleneck) else m.bn2
                bn.weight.mul_(residual_scale)
                bn.bias.mul_(residual_scale)
    det = ResNetDetector(trunk, nc, anchors)
    return frozen(fold_bn(det) if fuse else det)

"""torchvision ResNet backbones with a small detection head."""

from __future__ import annotations

import torch
from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models.common import LayerRef, calibrate_bn


class ResNetDetector(nn.Module):
    """A torchvision ResNet trunk with a small detection head on the stride-32 map (3x3 conv to
    256 + ReLU, ``anchors*(4+nc)`` logits); returns (B, 4+nc, anchors*H*W)."""

    STAGES = ("stem", "layer1", "layer2", "layer3", "layer4", "head")

    def __init__(self, trunk: nn.Module, nc: int, anchors: int):
        super().__init__()
        self.stem = nn.Sequential(trunk.conv1, trunk.bn1, trunk.relu, trunk.maxpool)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            trunk.layer1,
            trunk.layer2,
            trunk.layer3,
            trunk.layer4,
        )
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
        return [
            LayerRef(
                i,
                n,
                type(getattr(self, n)).__name__,
                "head" if n == "head" else "backbone",
                getattr(self, n),
            )
            for i, n in enumerate(self.STAGES)
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
    head. ``residual_scale`` damps each residual branch (1.0: 16-bit output 0.4-0.9 off fp32)."""
    import torchvision

    builders = {18: "resnet18", 34: "resnet34", 50: "resnet50", 101: "resnet101", 152: "resnet152"}
    if depth not in builders:
        raise UserError(f"ResNet depth must be one of {', '.join(map(str, builders))}, got {depth}")
    torch.manual_seed(seed)
    trunk = getattr(torchvision.models, builders[depth])(weights=None)
    calibrate_bn(trunk, seed=seed)
    if residual_scale != 1.0:
        scale_residual_branches(trunk, residual_scale)
    trunk.eval()
    if fuse:
        _fuse_resnet(trunk)
    det = ResNetDetector(trunk, nc, anchors).eval()
    for p in det.parameters():
        p.requires_grad_(False)
    return det


def scale_residual_branches(trunk: nn.Module, scale: float) -> int:
    """Scale the last BatchNorm (weight, bias) of every residual block of ``trunk`` by
    ``scale``; returns how many blocks."""
    import torchvision

    n = 0
    with torch.no_grad():
        for m in trunk.modules():
            if isinstance(m, torchvision.models.resnet.Bottleneck):
                bn = m.bn3
            elif isinstance(m, torchvision.models.resnet.BasicBlock):
                bn = m.bn2
            else:
                continue
            bn.weight.mul_(scale)
            bn.bias.mul_(scale)
            n += 1
    return n


def _fuse_resnet(trunk: nn.Module) -> None:
    """Fold every BatchNorm into the conv before it (eval-mode arithmetic is unchanged)."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    def fold(parent, conv_name, bn_name):
        setattr(
            parent,
            conv_name,
            fuse_conv_bn_eval(getattr(parent, conv_name), getattr(parent, bn_name)),
        )
        setattr(parent, bn_name, nn.Identity())

    fold(trunk, "conv1", "bn1")
    for layer in (trunk.layer1, trunk.layer2, trunk.layer3, trunk.layer4):
        for block in layer:
            for i in (1, 2, 3):
                if hasattr(block, f"conv{i}"):
                    fold(block, f"conv{i}", f"bn{i}")
            if block.downsample is not None:
                ds = block.downsample
                ds[0] = fuse_conv_bn_eval(ds[0], ds[1])
                ds[1] = nn.Identity()

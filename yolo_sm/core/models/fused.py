"""A BN-folded ResNet detector whose convs apply bias, residual add and ReLU in cuDNN's epilogue
(``torch.cudnn_convolution_relu`` / ``_add_relu``); without cuDNN the same arithmetic in
``F.conv2d`` + ``relu``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models.common import frozen


def _on_cudnn(x: torch.Tensor) -> bool:
    return x.is_cuda and torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled


class _FusedConv(nn.Module):
    """A convolution's weight, bias and geometry (stride, padding, dilation, groups)."""

    def __init__(self, conv: nn.Conv2d, bias: torch.Tensor | None = None):
        super().__init__()
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise UserError("fused convolutions take zero padding given as numbers")
        self.weight = nn.Parameter(conv.weight.detach().clone(), requires_grad=False)
        b = conv.bias if bias is None else bias
        b = torch.zeros(conv.out_channels) if b is None else b.detach().clone()
        self.bias = nn.Parameter(b, requires_grad=False)
        self.stride, self.padding = tuple(conv.stride), tuple(conv.padding)
        self.dilation, self.groups = tuple(conv.dilation), conv.groups

    def _conv(self, x):
        return F.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class ConvReLU(_FusedConv):
    """relu(conv(x) + bias) in one cuDNN call (``torch.cudnn_convolution_relu``)."""

    def forward(self, x):
        if _on_cudnn(x):
            return torch.cudnn_convolution_relu(
                x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
            )
        return F.relu(self._conv(x))


class ConvAddReLU(_FusedConv):
    """relu(conv(x) + bias + z) in one cuDNN call (``torch.cudnn_convolution_add_relu``)."""

    def forward(self, x, z):
        if _on_cudnn(x):
            nhwc = x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
            z = z.contiguous(memory_format=torch.channels_last if nhwc else torch.contiguous_format)
            geometry = (self.stride, self.padding, self.dilation, self.groups)
            return torch.cudnn_convolution_add_relu(x, self.weight, z, 1.0, self.bias, *geometry)
        return F.relu(self._conv(x) + z)


class BiasFreeConv(_FusedConv):
    """A convolution without its bias (the bias moved into the block's last fused conv)."""

    def forward(self, x):
        return F.conv2d(x, self.weight, None, self.stride, self.padding, self.dilation, self.groups)


class FusedBlock(nn.Module):
    """A BN-folded torchvision Bottleneck/BasicBlock as fused convs: ReLU in each, the residual
    add in the last (which also takes the bias-free downsample's bias)."""

    def __init__(self, block: nn.Module):
        super().__init__()
        convs = [getattr(block, f"conv{i}") for i in (1, 2, 3) if hasattr(block, f"conv{i}")]
        for name in ("bn1", "bn2", "bn3"):
            if hasattr(block, name) and not isinstance(getattr(block, name), nn.Identity):
                raise UserError("fuse the BatchNorms into the convolutions first")
        self.convs = nn.ModuleList(ConvReLU(c) for c in convs[:-1])
        last_bias = convs[-1].bias
        ds = block.downsample
        self.downsample = None
        if ds is not None:
            conv = ds[0]
            if any(not isinstance(m, nn.Identity) for m in list(ds)[1:]):
                raise UserError("fuse the downsample's BatchNorm into its convolution first")
            self.downsample = BiasFreeConv(conv)
            if conv.bias is not None:
                last_bias = conv.bias if last_bias is None else last_bias + conv.bias
        self.last = ConvAddReLU(convs[-1], last_bias)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = x
        for c in self.convs:
            out = c(out)
        return self.last(out, identity)


def fuse_conv_relu(det: nn.Module) -> nn.Module:
    """A copy of a BN-folded :class:`~yolo_sm.core.models.resnet.ResNetDetector` whose
    convolutions carry their ReLU (and each block's residual add) in one cuDNN call."""
    from torchvision.models.resnet import BasicBlock, Bottleneck

    out = copy.deepcopy(det).eval()
    stem = list(out.stem)
    conv, bn, _relu, pool = stem
    if not isinstance(bn, nn.Identity):
        raise UserError("fuse the BatchNorms into the convolutions first (fuse=True)")
    out.stem = nn.Sequential(ConvReLU(conv), pool)
    for name in ("layer1", "layer2", "layer3", "layer4"):
        blocks = [
            FusedBlock(b) if isinstance(b, (Bottleneck, BasicBlock)) else b
            for b in getattr(out, name)
        ]
        setattr(out, name, nn.Sequential(*blocks))
    head = list(out.head)
    out.head = nn.Sequential(ConvReLU(head[0]), *head[2:])
    return frozen(out)


def count_modules(model: nn.Module, kind: type) -> int:
    """Modules of type ``kind`` in ``model``."""
    return sum(isinstance(m, kind) for m in model.modules())


def fold_bn(det: nn.Module) -> nn.Module:
    """A copy of an unfused :class:`~.resnet.ResNetDetector` with every BatchNorm folded into the
    conv before it (``fuse_conv_bn_eval``)."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    out = copy.deepcopy(det).eval()

    def fold(parent, conv_name, bn_name):
        conv, bn = getattr(parent, conv_name), getattr(parent, bn_name)
        if isinstance(bn, nn.BatchNorm2d):
            setattr(parent, conv_name, fuse_conv_bn_eval(conv, bn))
            setattr(parent, bn_name, nn.Identity())

    fold(out.stem, "0", "1")
    for name in ("layer1", "layer2", "layer3", "layer4"):
        for block in getattr(out, name):
            for i in (1, 2, 3):
                if hasattr(block, f"conv{i}"):
                    fold(block, f"conv{i}", f"bn{i}")
            if block.downsample is not None:
                fold(block.downsample, "0", "1")
    return frozen(out)

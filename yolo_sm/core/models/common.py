"""Shared pieces of the model builders: layer references, a user's module wrapped, BatchNorm
calibration."""

from __future__ import annotations

import contextlib
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


class UserModel(nn.Module):
    """Wraps ``net``: returns the first tensor of its output (depth first), names layers by
    their path (top-level children, or those of a lone top-level container)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return first_tensor(self.net(x))

    def layer_refs(self) -> list[LayerRef]:
        prefix, parent = "", self.net
        while len(list(parent.children())) == 1:  # a lone container: its children are the layers
            name, child = next(iter(parent.named_children()))
            if not list(child.children()):
                break
            prefix, parent = f"{prefix}{name}.", child
        children = list(parent.named_children()) or [("net", self.net)]
        return [
            LayerRef(i, prefix + name if name != "net" else name, type(m).__name__, _stage(name), m)
            for i, (name, m) in enumerate(children)
        ]


def _stage(name: str) -> str:
    n = name.lower()
    if "head" in n or n in ("fc", "classifier"):
        return "head"
    return "neck" if "neck" in n else "backbone"


def first_tensor(out):
    """The first tensor of a (nested) output, or ``out`` itself when it holds none."""
    if isinstance(out, torch.Tensor):
        return out
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else ()
    for item in items:
        t = first_tensor(item)
        if isinstance(t, torch.Tensor):
            return t
    return out


def first_line(e: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an exception, its first line, at most ``limit`` characters."""
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return (text[0] if text else type(e).__name__)[:limit].rstrip(".")


def frozen(model: nn.Module) -> nn.Module:
    """``model`` in eval mode with every parameter's ``requires_grad`` off."""
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


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


@contextlib.contextmanager
def hooked(handles: list):
    """The block, then the module hooks ``handles`` removed (also after an error)."""
    try:
        yield
    finally:
        for h in handles:
            h.remove()

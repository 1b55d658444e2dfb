"""A user's own ``nn.Module`` as the engines and profilers take it: one tensor out, layers named
from its module tree."""

from __future__ import annotations

import torch
from torch import nn

from yolo_sm.core.models.common import LayerRef


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

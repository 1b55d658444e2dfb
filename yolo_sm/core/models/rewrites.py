"""Exact rewrites made before torch.compile (``vocab.COMPILE_REWRITES``, e.g.
``reduce-overhead+sep-pool``). ``sep-pool``: a stride-1 k x k max pool with ``k // 2`` padding
becomes a 1 x k then a k x 1 pool (bit-identical; 2k loads per output instead of k²).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SeparableMaxPool2d(nn.Module):
    """``nn.MaxPool2d(k, stride=1, padding=k // 2)`` as a 1 x k then a k x 1 max pool."""

    def __init__(self, kernel_size: int) -> None:
        super().__init__()
        self.kernel_size = int(kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, p = self.kernel_size, self.kernel_size // 2
        return F.max_pool2d(F.max_pool2d(x, (1, k), 1, (0, p)), (k, 1), 1, (p, 0))

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}"


def _square(v) -> int | None:
    """``v`` (an int or a pair) as one side when square, else None."""
    a, b = (v, v) if isinstance(v, int) else tuple(v)
    return int(a) if a == b else None


def separable(pool: nn.Module) -> bool:
    """Whether ``pool`` is a max pool :func:`separable_pools` rewrites: square odd kernel,
    stride 1, padding half the kernel, no dilation, no ceil mode, no indices."""
    if type(pool) is not nn.MaxPool2d or pool.return_indices or pool.ceil_mode:
        return False
    k = _square(pool.kernel_size)
    stride = pool.stride if pool.stride is not None else pool.kernel_size
    return (
        k is not None
        and k % 2 == 1
        and k > 1
        and _square(stride) == 1
        and _square(pool.padding) == k // 2
        and _square(pool.dilation) == 1
    )


def separable_pools(model: nn.Module) -> int:
    """Replace in place each max pool :func:`separable` accepts by a :class:`SeparableMaxPool2d`;
    returns how many modules."""
    n = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if separable(child):
                setattr(parent, name, SeparableMaxPool2d(_square(child.kernel_size)))
                n += 1
    return n


#: each rewrite of vocab.COMPILE_REWRITES: (model) -> modules changed
REWRITES = {"sep-pool": separable_pools}


def apply_rewrites(model: nn.Module, names) -> dict[str, int]:
    """Apply the named rewrites to ``model`` in place; per name, the modules it changed."""
    return {name: REWRITES[name](model) for name in names}

"""What the hand-written Triton kernels of the collect layer share (the NMS's in
:mod:`yolo_sm.core.nms`, the letterbox's in :mod:`yolo_sm.core.pipeline`): each kernel is
defined once per interpreter mode and kept in its module's cache, None where Triton is missing
or the kernel does not compile, so that its caller falls back to torch ops."""

from __future__ import annotations

import os
import warnings


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def triton_interpret() -> bool:
    """Triton's interpreter (``TRITON_INTERPRET=1``) runs its kernels on CPU tensors: the CPU
    tests check a GPU kernel's logic that way."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def cached_kernel(cache: dict, define):
    """``define(triton, tl)``'s kernel, made once per interpreter mode and kept in ``cache``;
    None where Triton is missing or the definition fails (the caller then uses torch ops)."""
    mode = triton_interpret()
    if mode not in cache:
        try:
            import triton
            import triton.language as tl

            cache[mode] = define(triton, tl)
        except Exception:  # noqa: BLE001 - no Triton: torch ops do the same in more passes
            cache[mode] = None
    return cache[mode]


def kernel_failed(cache: dict, what: str, e: Exception, instead: str) -> None:
    """A cached kernel failed at launch (e.g. does not compile for this GPU): warn once, saying
    what runs ``instead``, and drop it, so later calls use the torch ops."""
    warnings.warn(
        f"the Triton {what} kernel failed ({type(e).__name__}: {e}); {instead}", stacklevel=3
    )
    cache[triton_interpret()] = None

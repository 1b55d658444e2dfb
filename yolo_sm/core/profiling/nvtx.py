"""Layer ranges: forward hooks opening a ``record_function`` and an NVTX range named
``"<layer> <ModuleType> [<stage>]"`` around every layer. CUDA-graph replays and compiled
graphs carry no per-layer ranges.
"""

from __future__ import annotations

import contextlib
import functools
import re

from yolo_sm.core.models import layers

FORWARD_RANGE = "profiled_forward"
_NAME = re.compile(r"^(?P<layer>\S+) (?P<module_type>\S+) \[(?P<stage>[\w-]+)\]$")


def range_name(layer: str, module_type: str, stage: str) -> str:
    return f"{layer} {module_type} [{stage}]"


def parse_range(name: str) -> dict | None:
    """``{"layer", "module_type", "stage"}`` of a layer range name, or None for other ranges."""
    m = _NAME.match(name)
    return m.groupdict() if m else None


@functools.cache
def _nvtx():
    try:
        import torch.cuda.nvtx as nvtx

        nvtx.range_push("probe")
        nvtx.range_pop()
        return nvtx
    except Exception:  # noqa: BLE001 - no NVTX library: record_function ranges only
        return None


@contextlib.contextmanager
def layer_ranges(model, *, nvtx: bool = True):
    """Within the block, every layer of ``model`` runs in a record_function (and with ``nvtx``
    an NVTX) range; hooks are removed on exit."""
    handles, stack = [], []

    def pre(name):
        def hook(mod, args):
            stack.append(forward_range(name, nvtx))
            stack[-1].__enter__()

        return hook

    def pop(*_):
        stack.pop().__exit__(None, None, None)

    try:
        for ref in layers(model):
            name = range_name(ref.name, ref.module_type, ref.stage)
            handles.append(ref.module.register_forward_pre_hook(pre(name)))
            handles.append(ref.module.register_forward_hook(pop))
        yield
    finally:
        for h in handles:
            h.remove()
        while stack:  # an exception inside a layer left its range open
            pop()


@contextlib.contextmanager
def forward_range(name: str = FORWARD_RANGE, nvtx: bool = True):
    """One record_function + NVTX range around a whole forward (what ncu's
    ``--nvtx-include 'profiled_forward/'`` selects)."""
    import torch

    nv = _nvtx() if nvtx else None
    with torch.profiler.record_function(name):
        if nv is not None:
            nv.range_push(name)
        try:
            yield
        finally:
            if nv is not None:
                nv.range_pop()

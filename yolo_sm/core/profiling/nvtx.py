"""Layer ranges: forward hooks that open a ``record_function`` range (seen by the PyTorch
profiler) and an NVTX range (seen by Nsight Compute / Systems) around every model layer.

Range names are ``"<layer> <ModuleType> [<stage>]"``, e.g. ``"model.4 C2f [backbone]"``: no
``/``, which Nsight Compute's ``--nvtx-include`` uses to separate nested ranges.

What survives where: eager forwards carry every layer range. A CUDA graph replays kernels with no
CPU-side ranges, so per-layer attribution comes from profiling the eager forward the graph was
captured from (the kernels are the same). torch.compile traces through the hooks but Inductor
fuses kernels across layer boundaries, so its kernels carry only the ranges around the whole
compiled call (e.g. ``profiled_forward``).
"""

from __future__ import annotations

import contextlib
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
    """Within the block, every layer of ``model`` (:func:`yolo_sm.core.models.layers`) runs
    inside a
    record_function range and, when ``nvtx``, an NVTX range of the same name. Hooks are removed
    on exit, also after an exception."""
    import torch

    nv = _nvtx() if nvtx else None
    handles, stack = [], []

    def pre(name):
        def hook(mod, args):
            rf = torch.profiler.record_function(name)
            rf.__enter__()
            stack.append(rf)
            if nv is not None:
                nv.range_push(name)

        return hook

    def post(mod, args, out):
        if nv is not None:
            nv.range_pop()
        stack.pop().__exit__(None, None, None)

    try:
        for ref in layers(model):
            name = range_name(ref.name, ref.module_type, ref.stage)
            handles.append(ref.module.register_forward_pre_hook(pre(name)))
            handles.append(ref.module.register_forward_hook(post))
        yield
    finally:
        for h in handles:
            h.remove()
        while stack:  # an exception inside a layer left its range open
            if nv is not None:
                nv.range_pop()
            stack.pop().__exit__(None, None, None)


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

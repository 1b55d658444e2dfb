"""The GPU's ceilings, read from a dataset root's ``ceilings`` table (plan step ``ceilings``:
dense matmuls per precision, copy bandwidths), never from figures written into the code.

A root without that table (a CPU root, a GPU that was not measured) has no ceilings: the
functions return None and the callers say that what needs them cannot be drawn.
"""

from __future__ import annotations

from yolo_sm.contract import datasets
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError

CEILINGS = "ceilings"


def ceiling(root: DataRoot, name: str) -> tuple[float, str] | None:
    """(value, where it comes from) of ceiling ``name`` (``matmul_fp16``, ``copy_d2d``, ...)
    in ``root``'s ``ceilings`` table, or None when the root has no such row. The value is in
    the row's unit (TFLOP/s for matmuls, GB/s for copies)."""
    if not root.has(CEILINGS):
        return None
    c = root.load(CEILINGS)
    hit = c[c.ceiling == name]
    if hit.empty:
        return None
    row = hit.iloc[0]
    size = row["size"] if "size" in c and isinstance(row["size"], str) else ""
    what = f"{name}{f', {size}' if size else ''}"
    return float(row["value"]), f"{root.name}/{CEILINGS} ({what})"


def peak_fp16_tflops(root: DataRoot) -> tuple[float, str] | None:
    """(dense fp16 matmul TFLOP/s, source) measured on ``root``'s machine, or None."""
    return ceiling(root, "matmul_fp16")


def peak_copy_gbps(root: DataRoot) -> tuple[float, str] | None:
    """(device-to-device copy GB/s, source) measured on ``root``'s machine, or None."""
    return ceiling(root, "copy_d2d")


def roofline_ceilings(root: DataRoot) -> tuple[float, float] | None:
    """(peak fp16 TFLOP/s, peak copy GB/s) of ``root``, or None when either is missing."""
    pk, bw = peak_fp16_tflops(root), peak_copy_gbps(root)
    if pk is None or bw is None:
        return None
    return pk[0], bw[0]


def no_ceilings_message(root: DataRoot) -> str:
    """One line for a section that needs the ceilings ``root`` lacks."""
    return (
        f"{root.name} holds no measured ceilings ({CEILINGS}: dense fp16 matmul and "
        "device-to-device copy), so the absolute roofline cannot be drawn."
    )


def load_or_none(name: str):
    """Dataset ``name`` (``<root>/<short name>``), or None when it is not shipped."""
    try:
        return datasets.load(name)
    except UserError:
        return None

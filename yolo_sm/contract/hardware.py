"""The GPU's ceilings, read from a dataset root's ``ceilings`` table (plan step ``ceilings``:
dense matmuls per precision, copy bandwidths), never from figures written into the code.

Every ceiling here is the **burst** figure (a few calls after a rest, before the power limiter
pulls the clock down): the roofline and every share of peak divide by it, and its source says
so. A table measured before burst and sustained were told apart has one back-to-back figure per
ceiling; it is used as it is and its source says ``sustained`` (it may sit below what short
kernels reach). The datasheet's figure, where this module knows the GPU (:data:`DATASHEET`,
keyed by the GPU name in the table's provenance), is shown beside the measured one.

A root without that table (a CPU root, a GPU that was not measured) has no ceilings: the
functions return None and the callers say that what needs them cannot be drawn.
"""

from __future__ import annotations

from yolo_sm.contract import datasets
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError

CEILINGS = "ceilings"
#: the regime every ceiling of this module is read in
PEAK_REGIME = "burst"

#: Spec sheet figures per GPU name (as NVML / torch report it), dense (no sparsity), in the
#: ceilings table's units. Source: NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column;
#: its tensor-core figures are quoted with 2:4 sparsity, halved here for dense), HBM3e 4.8 TB/s.
DATASHEET: dict[str, dict[str, float]] = {
    "NVIDIA H200": {
        "matmul_fp32": 67.0,
        "matmul_tf32": 494.7,
        "matmul_fp16": 989.4,
        "matmul_bf16": 989.4,
        "matmul_fp8": 1979.0,
        "matmul_int8": 1979.0,  # TOP/s
        "copy_d2d": 4800.0,  # GB/s of HBM traffic (a copy reads and writes: 2 bytes per byte)
    },
}


def peak_rows(c):
    """The rows of a ceilings table that hold peaks: the :data:`PEAK_REGIME` rows, or every row
    of a table without a ``regime`` column (one back-to-back figure each)."""
    return c[c["regime"] == PEAK_REGIME] if "regime" in c else c


def peak_regime(root: DataRoot) -> str | None:
    """The regime of ``root``'s peaks: :data:`PEAK_REGIME`, ``sustained`` for a ceilings table
    without regimes, None without a ceilings table."""
    if not root.has(CEILINGS):
        return None
    return PEAK_REGIME if "regime" in root.load(CEILINGS) else "sustained"


def datasheet(gpu_name, name: str) -> float | None:
    """The datasheet figure of ceiling ``name`` for ``gpu_name``, or None for a GPU (or a
    ceiling) :data:`DATASHEET` does not list."""
    return DATASHEET.get(str(gpu_name), {}).get(name)


def ceiling(root: DataRoot, name: str) -> tuple[float, str] | None:
    """(value, where it comes from) of ceiling ``name`` (``matmul_fp16``, ``copy_d2d``, ...)
    in ``root``'s ``ceilings`` table, its burst figure (see the module docstring), or None when
    the root has no such row. The value is in the row's unit (TFLOP/s for matmuls, GB/s for
    copies); the source names the regime and, for a GPU the datasheet table knows, its figure."""
    if not root.has(CEILINGS):
        return None
    c = root.load(CEILINGS)
    hit = peak_rows(c)
    hit = hit[hit.ceiling == name]
    if hit.empty:
        return None
    row = hit.iloc[0]
    size = row["size"] if "size" in c and isinstance(row["size"], str) else ""
    if "kernel" in c and isinstance(row["kernel"], str):
        size = f"{size}, {row['kernel']}" if size else row["kernel"]
    regime = peak_regime(root)
    sheet = datasheet(row.get("prov_gpu_name"), name)
    unit = row["unit"] if "unit" in c else ""
    beside = f"; datasheet {sheet:,.4g} {unit}" if sheet is not None else ""
    what = f"{name}{f', {size}' if size else ''}, {regime}{beside}"
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

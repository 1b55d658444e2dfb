"""The GPU's ceilings from a root's ``ceilings`` table (never from literals): the burst figure
(older tables: one ``sustained`` figure), with the datasheet's beside it where known
(:data:`DATASHEET`). A root without that table has none: functions return None.
"""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot

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
    """The peak rows of a ceilings table: :data:`PEAK_REGIME`'s, or all without a ``regime``."""
    return c[c["regime"] == PEAK_REGIME] if "regime" in c else c


def datasheet(gpu_name, name: str) -> float | None:
    """The :data:`DATASHEET` figure of ceiling ``name`` for ``gpu_name``, or None."""
    return DATASHEET.get(str(gpu_name), {}).get(name)


def ceiling(root: DataRoot, name: str) -> tuple[float, str] | None:
    """(value, source) of ceiling ``name`` (``matmul_fp16``, ``copy_d2d``...) in ``root`` in its
    unit (TFLOP/s or GB/s), or None."""
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
    regime = PEAK_REGIME if "regime" in c else "sustained"
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

"""hardware: split from report.claims."""

from __future__ import annotations

from yolo_sm.contract import datasets
from yolo_sm.contract.errors import UserError

# dense fp16 tensor-core peak measured on the H200 machine kind (../shared/h200/README.md,
# an 8192^3 bf16/fp16 matmul on random data); the datasheet says ~990
PEAK_FP16_TFLOPS = 790.0


REFERENCE_COPY_GBPS = 4300.0  # device-to-device copy, same source


def peak_copy_gbps() -> tuple[float, str]:
    """(device-to-device copy GB/s, where it comes from): ``h200/ceilings`` when shipped, else
    the project brief's ~4.3 TB/s reference figure of this machine kind."""
    c = load_or_none("h200/ceilings")
    if c is not None and (c.ceiling == "copy_d2d").any():
        v = float(c.loc[c.ceiling == "copy_d2d", "value"].iloc[0])
        return v, "measured by yolo_sm (h200/ceilings, 1 GiB device-to-device copy)"
    return REFERENCE_COPY_GBPS, "reference figure of this machine kind (project brief)"


def peak_fp16_tflops() -> tuple[float, str]:
    """(dense fp16 TFLOP/s, where it comes from): yolo_sm's own measurement (``h200/ceilings``)
    when shipped, else :data:`PEAK_FP16_TFLOPS`, the reference figure of the project brief."""
    c = load_or_none("h200/ceilings")
    if c is not None and (c.ceiling == "matmul_fp16").any():
        row = c.loc[c.ceiling == "matmul_fp16"].iloc[0]
        size = f"{row['size']} " if "size" in c and isinstance(row["size"], str) else ""
        return float(row["value"]), f"measured by yolo_sm (h200/ceilings, {size}fp16 matmul)"
    return PEAK_FP16_TFLOPS, "reference figure of this machine kind (project brief)"


def load_or_none(name: str):

    try:
        return datasets.load(name)
    except UserError:
        return None

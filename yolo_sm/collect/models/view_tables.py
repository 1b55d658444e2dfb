"""Live GPM sampling for a notebook on a GPU machine (not a model table)."""

from __future__ import annotations

from yolo_sm.collect.profiling import suite


def live_gpm(widths=(1.0,), batch: int = 1, seconds: float = 3.0, family: str = "yolov8"):
    """Run :func:`yolo_sm.collect.profiling.suite.run_gpm` now on this machine's GPU (fp16 NHWC
    eager, 640 px), one config per width back to back. Returns the tidy GPM frame, or None
    without a CUDA GPU (nothing is built then)."""
    import torch

    if not torch.cuda.is_available():
        return None

    built = list(suite.engines(family, widths, "fp16", "nhwc", batch, 640, "cuda"))
    df, _ = suite.run_gpm(built, seconds=seconds)
    return df

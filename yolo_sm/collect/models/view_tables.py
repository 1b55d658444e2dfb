"""view_tables: split from analyse.batch."""

from __future__ import annotations

from functools import lru_cache

from yolo_sm.collect.models import build_yolo, channel_table
from yolo_sm.collect.models.resnet import ResNetDetector, _fuse_resnet
from yolo_sm.collect.profiling import suite


def live_gpm(widths=(1.0,), batch: int = 1, seconds: float = 3.0, family: str = "yolov8"):
    """Run :func:`yolo_sm.collect.profiling.suite.run_gpm` now on this machine's GPU (fp16 NHWC
    eager,
    640 px), one config per width back to back. Returns the tidy GPM frame, or None without a
    CUDA GPU (nothing is built then)."""
    import torch

    if not torch.cuda.is_available():
        return None

    built = list(suite.engines(family, widths, "fp16", "nhwc", batch, 640, "cuda"))
    df, _ = suite.run_gpm(built, seconds=seconds)
    return df


@lru_cache(maxsize=16)
def yolo_model(width: float, family: str = "yolov8", depth: float = 0.33):
    """A YOLO model for counting only (no BN calibration: FLOPs and shapes do not depend on
    weights); cached, as ultralytics' constructor runs a CPU forward."""

    return build_yolo(family, float(width), depth=depth, calibrate=False)


@lru_cache(maxsize=4)
def resnet_model(depth: int = 101):
    """The ResNet detector of :func:`yolo_sm.collect.models.resnet_backbone` (same trunk, BN
    folded, same
    head), built without its BN calibration, which only sets values: for counting."""
    import torchvision

    trunk = getattr(torchvision.models, f"resnet{depth}")(weights=None).eval()
    _fuse_resnet(trunk)
    return ResNetDetector(trunk, nc=1, anchors=2).eval()


@lru_cache(maxsize=64)
def yolo_traffic(width: float, imgsz: int = 640, batch: int = 1, bytes_per_element: int = 2,
                 family: str = "yolov8", depth: float = 0.33):  # fmt: skip
    """:func:`layer_traffic` of :func:`yolo_model`, cached (do not modify the result)."""
    return layer_traffic(yolo_model(width, family, depth), imgsz, batch, bytes_per_element)


def layer_traffic(model, imgsz: int = 640, batch: int = 1, bytes_per_element: int = 2):
    """The channel table (:func:`yolo_sm.collect.models.channel_table`) plus, per layer and for a
    batch:
    ``flops_batch``, ``weight_bytes``, ``in_bytes`` (its 4-D inputs), ``out_bytes``,
    ``min_bytes`` (weights + inputs + output once), ``conv_bytes`` (every conv inside reading its
    input and weights and writing its output), and the arithmetic intensities
    ``intensity`` = flops / min_bytes and ``conv_intensity`` = flops / conv_bytes (FLOP/byte)."""

    ct = channel_table(model, imgsz, bytes_per_element)
    b = bytes_per_element
    out = ct.copy()
    out["batch"] = batch
    out["flops_batch"] = out.flops * batch
    out["weight_bytes"] = out.params * b
    out["in_bytes"] = out.in_elems.astype("int64") * b * batch
    out["out_bytes"] = out.activation_bytes * batch
    out["min_bytes"] = out.weight_bytes + out.in_bytes + out.out_bytes
    out["conv_bytes"] = (out.conv_io_elems * batch + out.conv_weight_elems).astype("int64") * b
    out["intensity"] = out.flops_batch / out.min_bytes
    out["conv_intensity"] = (out.flops_batch / out.conv_bytes).where(out.conv_bytes > 0)
    return out


def activation_table(widths=(0.25, 0.5, 1.0, 1.5, 2.0), imgsz=640, bytes_per_element=2):
    """Per width and layer: output activation bytes per image (fp16 by default) from the channel
    table, with the layer's weight bytes for comparison."""
    import pandas as pd

    rows = []
    for w in widths:
        ct = yolo_traffic(float(w), imgsz, 1, bytes_per_element)
        rows.append(
            ct.assign(
                width=float(w),
                activation_mb=ct.activation_bytes / 1e6,
                weight_mb=ct.params * bytes_per_element / 1e6,
                label=ct.layer + " " + ct.module_type,
            )
        )
    return pd.concat(rows, ignore_index=True)

"""YOLO families from ultralytics' YAML at any width and depth, random weights, fused."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models import model_yaml
from yolo_sm.core.models.common import (
    MAX_WIDTH,
    MIN_WIDTH,
    calibrate_bn,
    first_line,
    first_tensor,
    frozen,
)
from yolo_sm.core.offline import prepare_ultralytics

FAMILIES = {"yolov8": "v8/yolov8.yaml", "yolo11": "11/yolo11.yaml"}


class YoloForward(nn.Module):
    """An ultralytics DetectionModel returning the head's raw output (B, 4*reg_max + nc,
    anchors), or with ``decode`` ultralytics' (B, 4 + nc, anchors). The head keeps
    ``training`` set to take its raw path; :meth:`train` preserves that.
    """

    def __init__(self, det: nn.Module, meta: dict, decode: bool = False):
        super().__init__()
        self.det = det
        self.meta = meta
        self.decode = decode
        # The raw output's concatenation runs inside the head's own forward (a hook registered
        # before any profiling hook), so profilers attribute its kernel to the head layer.
        det.model[-1].register_forward_hook(_raw_head_output)
        self.train(False)

    def train(self, mode: bool = True):
        super().train(mode)
        self.det.model[-1].training = mode or not self.decode
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.det(x)
        if isinstance(out, dict):
            out = out.get("one2one", out)  # an unfused end-to-end head: its NMS-free branch
        if isinstance(out, dict) and "boxes" in out:
            return torch.cat((out["boxes"], out["scores"]), 1)
        return first_tensor(out)


def _raw_head_output(module, args, out):
    """Forward hook on the Detect layer: its raw (training-mode) dict output as one tensor."""
    if isinstance(out, dict) and "boxes" in out:
        return torch.cat((out["boxes"], out["scores"]), 1)
    return None


def family_cfg(family: str) -> dict:
    """The model dict of a built-in family's YAML as this ultralytics ships it."""
    if family not in FAMILIES:
        raise UserError(f"unknown family {family!r}: choose one of {', '.join(FAMILIES)}")
    prepare_ultralytics()
    import ultralytics
    from ultralytics.nn.tasks import yaml_model_load

    path = Path(ultralytics.__file__).parent / "cfg" / "models" / FAMILIES[family]
    if not path.exists():
        raise UserError(f"this ultralytics ({ultralytics.__version__}) ships no {family} YAML")
    return yaml_model_load(path)


def preset(family: str, scale: str) -> tuple[float, float, int]:
    """(depth, width, max_channels) of a preset such as ('yolov8', 's'), from ultralytics' YAML."""
    scales = family_cfg(family).get("scales", {})
    if scale not in scales:
        raise UserError(f"unknown {family} preset {scale!r}: choose one of {', '.join(scales)}")
    depth, width, max_ch = scales[scale]
    return float(depth), float(width), int(max_ch)


def scaled_cfg(family: str, width: float | str = 1.0, depth=None, max_channels: int = 2048):
    """(the family's model dict, the preset letter or None) at ``width`` (0.0625 to 4, or a
    preset letter n/s/m/l/x) and ``depth`` (default a preset's own, else 0.33)."""
    scale = None
    if isinstance(width, str):
        try:
            width = float(width)
        except ValueError:
            scale = width
            p_depth, width, max_channels = preset(family, scale)
            depth = p_depth if depth is None else depth
    depth = 0.33 if depth is None else float(depth)
    if not (MIN_WIDTH <= width <= MAX_WIDTH) or math.isnan(width):
        raise UserError(f"width must be between {MIN_WIDTH} and {MAX_WIDTH}, got {width}")
    if not 0 < depth <= 4:
        raise UserError(f"depth must be in (0, 4], got {depth}")
    if int(max_channels) <= 0:
        raise UserError("max_channels and nc must be positive integers")
    cfg = family_cfg(family)
    cfg.update(scales={"custom": [depth, float(width), int(max_channels)]}, scale="custom")
    return cfg, scale


def build_yolo(
    family: str = "yolov8",
    width: float | str = 1.0,
    depth: float | None = None,
    max_channels: int = 2048,
    nc: int = 80,
    fuse: bool = True,
    seed: int = 0,
    decode: bool = False,
    calibrate: bool = True,
) -> YoloForward:
    """A YOLO detector at :func:`scaled_cfg`, random weights, Conv+BN fused, eval;
    ``calibrate`` sets BN statistics from photos first (else activations vanish in fp16)."""
    cfg, scale = scaled_cfg(family, width, depth, max_channels)
    if int(nc) <= 0:
        raise UserError("max_channels and nc must be positive integers")
    det = detection_model(cfg, nc=nc, seed=seed, calibrate=calibrate)
    return wrap_detection(det, fuse=fuse, decode=decode, scale=scale)


def detection_model(
    cfg: dict, nc: int | None = 80, seed: int = 0, calibrate: bool = True, cls=None
):
    """An ultralytics model (``cls``, default DetectionModel) from a checked YAML dict, random
    weights (``seed``), BN calibrated unless ``calibrate`` is False; unfused, eval."""
    prepare_ultralytics()
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(seed)
    det = (cls or DetectionModel)(cfg, ch=3, nc=nc, verbose=False)
    if calibrate:
        calibrate_bn(det, seed=seed)
    return det.eval()


def wrap_detection(det, fuse: bool = True, decode: bool = False, scale=None) -> YoloForward:
    """``det`` (an ultralytics DetectionModel) fused, eval, no grad, as a :class:`YoloForward`
    with ``meta`` (width, max_channels, preset ``scale``, layer entries) from ``det.yaml``."""
    cfg = det.yaml if isinstance(getattr(det, "yaml", None), dict) else {}
    _, width, max_channels = scale_of(cfg)
    det = det.float().eval()
    det = frozen(det.fuse(verbose=False) if fuse else det)
    entries = [list(x) for x in cfg.get("backbone", []) + cfg.get("head", [])]
    if len(entries) != len(det.model):  # no usable YAML: layers named from the module list
        entries = [[-1, 1, type(m).__name__, []] for m in det.model]
    meta = {
        "width": width,
        "max_channels": max_channels,
        "scale": scale,
        "yaml": entries,
        "n_backbone": len(cfg.get("backbone", [])) or len(det.model) - 1,
    }
    return YoloForward(det, meta, decode=decode)


def scale_of(cfg: dict) -> tuple[float, float, int]:
    """(depth, width, max_channels) a YAML dict builds with (its scale, else its multiples)."""
    scales = cfg.get("scales") or {}
    if scales:
        d, w, mc = scales[cfg.get("scale") if cfg.get("scale") in scales else next(iter(scales))]
        return float(d), float(w), int(mc)
    return (
        float(cfg.get("depth_multiple", 1.0)),
        float(cfg.get("width_multiple", 1.0)),
        int(cfg.get("max_channels", 2048) or 2048),
    )


def build_from_yaml(name: str, seed: int = 0, calibrate: bool = True) -> YoloForward:
    """The model of an ultralytics YAML (path or bare name, as ``YOLO(name)`` resolves it):
    random weights, BN calibrated, fused, eval."""
    cfg = model_yaml.read(name)
    try:
        det = detection_model(cfg, cfg.get("nc", 80), seed, calibrate, model_yaml.model_class(cfg))
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - a YAML ultralytics cannot build is one sentence
        raise UserError(
            f"model YAML {name} does not build an ultralytics model ({first_line(e)})"
        ) from None
    return wrap_detection(det, decode="RTDETR" in type(det.model[-1]).__name__)  # (B, nq, 4+nc)

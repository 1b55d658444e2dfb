"""Model specs, parsed here and built by :func:`build_spec` (``LABEL=`` in front names it)::

    yolov8:0.5  yolo11:n  wide:1.5  resnet101     a built-in family (random weights)
    path/to/model.yaml  yolo11s-seg.yaml          an ultralytics YAML (random weights)
    path/to/best.pt                               an ultralytics checkpoint (trained weights)
    package.module:function                       a function returning an nn.Module (needs C,H,W)

Checkpoints load restricted, YAMLs as checked data; a module spec runs the user's code.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import re
import sys
from pathlib import Path

import torch
from torch import nn

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models import model_yaml
from yolo_sm.core.models.checkpoint import (
    checkpoint_module,
    load_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from yolo_sm.core.models.common import MAX_WIDTH, MIN_WIDTH, UserModel, first_line, frozen
from yolo_sm.core.models.resnet import resnet_backbone
from yolo_sm.core.models.wide import wide_conv_stack
from yolo_sm.core.models.yolo import (
    FAMILIES,
    build_from_yaml,
    build_yolo,
    detection_model,
    preset,
    scale_of,
    scaled_cfg,
)

#: families the project builds itself (width: multiplier, preset letter, or ignored)
BUILT_IN = ("yolov8", "yolo11", "wide", "resnet")
_CALLABLE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_LABEL = re.compile(r"^[A-Za-z0-9][\w.-]*$")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model to measure: ``kind`` (family / yaml / checkpoint / module), ``source``,
    ``width`` (1.0 outside families), ``input_shape`` (C, H, W; modules), ``name`` (table label)."""

    kind: str
    source: str
    width: float | str = 1.0
    input_shape: tuple[int, int, int] | None = None
    name: str = ""

    @property
    def text(self) -> str:
        """The spec as :func:`parse_model` reads it back (without the input shape)."""
        body = self.source
        if self.kind == "family" and not self.source.startswith("resnet"):
            body += ":" + (self.width if isinstance(self.width, str) else f"{self.width:g}")
        return body if self.name == default_name(self.kind, self.source) else f"{self.name}={body}"

    @property
    def imgsz(self) -> int | None:
        """The square input side the spec fixes (from ``input_shape``), or None."""
        return None if self.input_shape is None else int(self.input_shape[1])


def default_name(kind: str, source: str) -> str:
    """The label of a spec without ``LABEL=``: the family, or the file / function name."""
    if kind == "family":
        return source
    stem = Path(source).stem if kind in ("yaml", "checkpoint") else source.rpartition(":")[2]
    name = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "model"
    if name in BUILT_IN or name.startswith("resnet"):
        name += "-" + kind  # never the label of a built-in family
    return name


def parse_shape(value) -> tuple[int, int, int] | None:
    """``"3,640,640"`` (or a sequence) -> (3, 640, 640); None stays None. One image, no batch;
    the engines feed square RGB images, so C must be 3 and H equal W."""
    if value is None or value == "":
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        shape = tuple(int(str(p).strip()) for p in parts)
    except ValueError:
        raise UserError(
            f"input shape must be C,H,W integers such as 3,640,640, got {value!r}"
        ) from None
    if len(shape) != 3 or min(shape) <= 0:
        raise UserError(f"input shape must be three positive integers C,H,W, got {value!r}")
    if shape[0] != 3 or shape[1] != shape[2]:
        raise UserError(
            f"input shape {','.join(map(str, shape))} is not supported: the engines feed square "
            "3-channel images (3,S,S)"
        )
    return shape


def parse_model(text, input_shape=None, need_shape: bool = True) -> ModelSpec:
    """A :class:`ModelSpec` from its text (a spec passes through); files must exist; a module
    spec needs ``input_shape`` unless ``need_shape`` is False. Loads nothing."""
    shape = parse_shape(input_shape)
    if isinstance(text, ModelSpec):
        return text if shape is None else dataclasses.replace(text, input_shape=shape)
    s = str(text).strip()
    if not s:
        raise UserError(
            "a model spec is empty: use family:width, a .yaml, a .pt or module:function"
        )
    name = ""
    head, eq, rest = s.partition("=")
    if eq and _LABEL.match(head) and "/" not in head:
        name, s = re.sub(r"[^a-z0-9]+", "-", head.lower()).strip("-"), rest.strip()
    suffix = Path(s).suffix.lower()
    if suffix in (".pt", ".pth", ".yaml", ".yml") or "/" in s or Path(s).exists():
        kind = "checkpoint" if suffix in (".pt", ".pth") else "yaml"
        p = Path(s)
        if kind == "yaml" and suffix in (".yaml", ".yml") and not p.is_dir():
            if model_yaml.locate(s) is None:  # a path, or a name YOLO(name) resolves
                raise UserError(model_yaml.not_found(s))
        elif not p.exists():
            raise UserError(f"model file {s} does not exist")
        if p.is_dir() or (kind == "checkpoint" and not p.is_file()):
            raise UserError(f"model file {s} is not a file")
        if suffix not in (".pt", ".pth", ".yaml", ".yml"):
            raise UserError(f"model file {s} is neither a .pt checkpoint nor a .yaml model")
        spec = ModelSpec(kind, s, 1.0, shape, name or default_name(kind, s))
    elif _CALLABLE.match(s) and s.partition(":")[0].lower() not in BUILT_IN:
        if shape is None and need_shape:
            raise UserError(f"model {s} is a module:function: give its input shape (3,H,W)")
        spec = ModelSpec("module", s, 1.0, shape, name or default_name("module", s))
    else:
        spec = _family(s, shape, name)
    return spec


def _family(s: str, shape, name: str) -> ModelSpec:
    fam, _, w = s.partition(":")
    fam = fam.strip().lower()
    if fam.startswith("resnet"):
        if not re.fullmatch(r"resnet(18|34|50|101|152)", fam) or w:
            raise UserError(f"unknown model {s!r}: use resnet18/34/50/101/152 (no width)")
        return ModelSpec("family", fam, 1.0, shape, name or fam)
    if fam not in BUILT_IN:
        raise UserError(
            f"unknown model {s!r}: use yolov8:WIDTH, yolo11:WIDTH, wide:WIDTH, resnet101, a .yaml, "
            "a .pt checkpoint or package.module:function"
        )
    w = w.strip().lower() or "1.0"
    if w in ("n", "s", "m", "l", "x") and fam != "wide":
        return ModelSpec("family", fam, w, shape, name or fam)
    try:
        width = float(w)
    except ValueError:
        raise UserError(f"model {s!r}: width must be a number or n/s/m/l/x") from None
    if not MIN_WIDTH <= width <= MAX_WIDTH or math.isnan(width):
        raise UserError(f"model {s!r}: width must be between {MIN_WIDTH} and {MAX_WIDTH}")
    return ModelSpec("family", fam, width, shape, name or fam)


def parse_models(value, input_shape=None, need_shape: bool = True) -> tuple[ModelSpec, ...]:
    """Specs from a comma list, a list of them (e.g. a repeated ``--model``), or None (empty);
    ``need_shape`` as in :func:`parse_model`."""
    if value is None:
        return ()
    items = [value] if isinstance(value, (str, ModelSpec)) else list(value)
    out = []
    for item in items:
        parts = item.split(",") if isinstance(item, str) else [item]
        out += [
            parse_model(p, input_shape, need_shape)
            for p in parts
            if not isinstance(p, str) or p.strip()
        ]
    if not out:
        raise UserError("no model given")
    return tuple(dict.fromkeys(out))


def build(family, width: float | str | None = None, **kw) -> nn.Module:
    """Any model by family: ``yolov8``/``yolo11`` (``width`` multiplier or preset letter),
    ``wide`` (width factor), ``resnet18``..``resnet152``; ``kw`` for YOLO only. A
    :class:`ModelSpec` or spec text without ``width`` goes to :func:`build_spec`."""
    if isinstance(family, ModelSpec) or (width is None and not str(family).isalnum()):
        return build_spec(family, **kw)
    fam, width = str(family).lower(), 1.0 if width is None else width
    if fam == "wide":
        return wide_conv_stack(float(width))
    if fam.startswith("resnet"):
        if not (fam[6:] or "101").isdigit():
            raise UserError(f"unknown family {family!r}: use resnet18/34/50/101/152")
        return resnet_backbone(int(fam[6:] or 101))
    return build_yolo(fam, width, **kw)


def build_spec(spec, device: str = "cpu", input_shape=None, **kw):
    """The model of ``spec`` on ``device``, eval, no grad, one output tensor, layers named;
    ``kw`` for YOLO families; families and YAMLs get BN calibration."""
    spec = parse_model(spec, input_shape)
    if spec.kind == "family":
        model = build(spec.source, spec.width, **kw)
    elif spec.kind == "yaml":
        model = build_from_yaml(spec.source)
    elif spec.kind == "checkpoint":
        model = load_checkpoint(spec.source)
    else:
        model = _build_callable(spec)
    if spec.input_shape is not None:
        check_input_shape(model, spec)
    return model.to(device)


def _build_callable(spec: ModelSpec):
    mod_name, _, attr = spec.source.partition(":")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # modules of the folder the command runs in, like `python -m`
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise UserError(f"model {spec.source}: cannot import {mod_name} ({e})") from None
    fn = mod
    for part in attr.split("."):
        fn = getattr(fn, part, None)
    if not callable(fn):
        raise UserError(f"model {spec.source}: {mod_name} has no function {attr}")
    torch.manual_seed(0)
    try:
        model = fn()
    except Exception as e:  # noqa: BLE001 - the user's function failing is one sentence
        raise UserError(f"model {spec.source}: {attr}() failed ({first_line(e)})") from None
    if not isinstance(model, nn.Module):
        raise UserError(
            f"model {spec.source}: {attr}() returned a {type(model).__name__}, "
            "not a torch nn.Module"
        )
    return UserModel(frozen(model)).eval()


def check_input_shape(model, spec: ModelSpec) -> None:
    """One batch-1 forward of zeros at ``spec.input_shape`` on the CPU: a model that rejects the
    shape, or returns no tensor, is a :class:`UserError`."""
    x = torch.zeros(1, *spec.input_shape)
    try:
        with torch.no_grad():
            out = model(x)
    except Exception as e:  # noqa: BLE001 - any failure of the user's forward is one sentence
        shape = ",".join(map(str, spec.input_shape))
        raise UserError(
            f"model {spec.text} rejects input shape {shape} ({first_line(e)})"
        ) from None
    if not isinstance(out, torch.Tensor):
        raise UserError(f"model {spec.text} returns a {type(out).__name__}, not a tensor")


def spec_scale(spec: ModelSpec) -> tuple[float, float, int]:
    """(width, depth, max_channels) of a YAML or checkpoint detector; (1.0, 1.0, 0) for other
    modules. Cached per file version."""
    if spec.kind not in ("yaml", "checkpoint"):
        return 1.0, 1.0, 0
    hit = model_yaml.locate(spec.source) if spec.kind == "yaml" else None
    p = hit[0] if hit else Path(spec.source)
    return _file_scale(spec.kind, spec.source, str(p.resolve()), p.stat().st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _file_scale(kind: str, name: str, path: str, mtime_ns: int) -> tuple[float, float, int]:
    if kind == "yaml":
        cfg = model_yaml.read(name)
    else:
        cfg = getattr(checkpoint_module(read_checkpoint(path), path), "yaml", None)
        if not isinstance(cfg, dict):
            return 1.0, 1.0, 0
    depth, width, max_ch = scale_of(cfg)
    return width, depth, max_ch


def weights_calibrated(spec: ModelSpec) -> bool:
    """Whether the model's BatchNorm statistics come from the project's calibration (the built-in
    families and YAMLs: random weights) rather than from its author (a checkpoint, a module)."""
    return spec.kind in ("family", "yaml")


def label_parts(spec: ModelSpec) -> tuple[str, float]:
    """(family, width) for a config label (:func:`yolo_sm.contract.labels.config_label`): the
    spec's name and its width multiplier (a preset's own width; a file's scale)."""
    if spec.kind != "family":
        return spec.name, spec_scale(spec)[0]
    width = spec.width
    return spec.name, preset(spec.source, width)[1] if isinstance(width, str) else float(width)


def save_checkpoint(spec, out: str | Path, seed: int = 0) -> Path:
    """Write the YOLO model of ``spec`` (family or YAML) as an ultralytics checkpoint: random
    weights (``seed``), BN calibrated, unfused, fp16. Returns the path."""
    spec = parse_model(spec)
    out = Path(out)
    if out.suffix != ".pt":
        raise UserError(f"checkpoint {out} must end in .pt")
    if spec.kind == "family" and spec.source in FAMILIES:
        cfg, cls = scaled_cfg(spec.source, spec.width)[0], None
    elif spec.kind == "yaml":
        cfg = model_yaml.read(spec.source)
        cls = model_yaml.model_class(cfg)
    else:
        raise UserError(
            f"models save writes YOLO detectors (yolov8:W, yolo11:W or a .yaml), not {spec.text}"
        )
    det = detection_model(cfg, nc=cfg.get("nc", 80), seed=seed, calibrate=True, cls=cls)
    source = {
        "spec": spec.text,
        "weights": "random",
        "seed": int(seed),
        "bn_calibration": "ultralytics' bundled photos (as they are and mirrored) and noise",
    }
    return write_checkpoint(det, out, source)

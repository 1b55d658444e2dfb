"""Dataset ``model_layers``: one row per model and layer with shapes, FLOPs and bytes per image
(``min_bytes``: fully fused, ``conv_bytes``: unfused convs; weights once per forward)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models import build, channel_table
from yolo_sm.core.models.spec import build_spec, parse_model, spec_scale

#: The models the notebooks read: YOLOv8 (depth 0.33) at the swept widths, the width at which
#: ``max_channels`` = 512 caps the deepest layers, ResNet-101 and the wide conv stack.
DEFAULT_MODELS: tuple[dict, ...] = (
    {"model": "yolov8", "widths": [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]},
    {"model": "yolov8", "widths": [1.25], "max_channels": 512},
    {"model": "resnet101"},
    {"model": "wide", "widths": [1.0, 1.25, 1.5, 1.75, 2.0]},
)

#: Column order of the table (the schema's ``model_tables`` kind describes each).
COLUMNS = tuple(
    "model family width depth max_channels imgsz batch bytes_per_element index layer module_type "
    "stage in_channels out_channels requested_channels rounded capped stride out_h out_w params "
    "flops weight_bytes in_bytes out_bytes min_bytes conv_io_bytes conv_weight_bytes "
    "conv_bytes".split()
)


def layer_rows(
    model: str,
    width: float = 1.0,
    *,
    depth: float = 0.33,
    max_channels: int = 2048,
    imgsz: int = 640,
    bytes_per_element: int = 2,
):
    """One row per layer of a YOLO family, ``resnet101``, ``wide`` or any model spec."""
    import pandas as pd

    spec = parse_model(model, need_shape=False)
    if spec.kind == "family":
        label = family = str(model).lower()
        m = build(family, float(width), depth=depth, max_channels=max_channels, calibrate=False)
    else:  # a model file or module:function (collect.models.spec): its own width and depth
        m = build_spec(spec, input_shape=spec.input_shape or (3, imgsz, imgsz))
        family, label = spec.name, spec.text
        width, depth, max_channels = spec_scale(spec)
    ct = channel_table(m, imgsz, bytes_per_element)
    b = int(bytes_per_element)
    yolo = family not in ("wide",) and not family.startswith("resnet")
    out = ct.drop(columns=["activation_bytes"]).assign(
        model=label,
        family=family,
        width=float(width) if not family.startswith("resnet") else 1.0,
        depth=float(depth) if yolo else float("nan"),
        max_channels=int(max_channels) if yolo else pd.NA,
        imgsz=int(imgsz),
        batch=1,
        bytes_per_element=b,
    )
    out["weight_bytes"] = out.params.astype("int64") * b
    out["in_bytes"] = out.in_elems.astype("int64") * b
    out["out_bytes"] = ct.activation_bytes.astype("int64")
    out["min_bytes"] = out.weight_bytes + out.in_bytes + out.out_bytes
    out["conv_io_bytes"] = out.conv_io_elems.astype("int64") * b
    out["conv_weight_bytes"] = out.conv_weight_elems.astype("int64") * b
    out["conv_bytes"] = out.conv_io_bytes + out.conv_weight_bytes
    out["max_channels"] = out.max_channels.astype("Int64")
    out["requested_channels"] = pd.to_numeric(out.requested_channels).astype(float)
    return out[list(COLUMNS)]


def model_layers(
    models: Iterable[Mapping] = DEFAULT_MODELS, imgsz: int = 640, bytes_per_element: int = 2
):
    """:func:`layer_rows` of every model and width of ``models`` (``model`` and optional
    ``widths``, ``depth``, ``max_channels``)."""
    import pandas as pd

    frames = []
    for spec in models:
        spec = dict(spec)
        unknown = set(spec) - {"model", "widths", "depth", "max_channels"}
        if "model" not in spec or unknown:
            raise UserError(
                f"a model_tables entry needs 'model' and may have widths, depth, max_channels; "
                f"got {sorted(spec)}"
            )
        widths = spec.get("widths", [1.0])
        for w in widths if isinstance(widths, (list, tuple)) else [widths]:
            depth, cap = float(spec.get("depth", 0.33)), int(spec.get("max_channels", 2048))
            kw = {"imgsz": imgsz, "bytes_per_element": bytes_per_element}
            frames.append(layer_rows(spec["model"], float(w), depth=depth, max_channels=cap, **kw))
    if not frames:
        raise UserError("model_tables needs at least one model")
    return pd.concat(frames, ignore_index=True)

"""What the ``yolo-sm`` command groups share: the parser class whose errors are one sentence,
the model flags and the parsers of flag values."""

from __future__ import annotations

import argparse

from yolo_sm.contract.errors import UserError


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one sentence (argparse would add a usage block)."""

    def error(self, message):
        raise UserError(f"{message} (see '{self.prog} --help')")


def model_flags(p: argparse.ArgumentParser, many: bool = False) -> None:
    """--family, --width (or --widths with ``many``), --imgsz, --device, and --model /
    --input-shape (:func:`model_spec_flags`) in place of the family and width."""
    p.add_argument("--family", default="yolov8", help="yolov8 or yolo11")
    if many:
        p.add_argument("--widths", default="1.0", help="comma list of width multipliers")
    else:
        p.add_argument("--width", type=float, default=1.0, help="width multiplier")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--device", default="cuda")
    model_spec_flags(p)


def model_spec_flags(p: argparse.ArgumentParser) -> None:
    """--model SPEC (repeatable, or a comma list) and --input-shape C,H,W: any model
    (yolo_sm.collect.models.spec), in place of the family and width flags."""
    p.add_argument(
        "--model",
        dest="models",
        action="append",
        help="family:width (yolov8:0.5, yolo11:n), a model .yaml, an ultralytics .pt checkpoint "
        "or package.module:function; repeatable or a comma list; replaces --family/--widths",
    )
    p.add_argument(
        "--input-shape",
        dest="input_shape",
        help="C,H,W of one input image, e.g. 3,640,640 (needed by a module:function model)",
    )


def comma_list(text: str | None) -> list[str]:
    """``"a,b,,c"`` -> ``["a", "b", "c"]``; None or empty -> ``[]``."""
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def widths(text: str) -> list[float]:
    """A comma list of positive width multipliers."""
    try:
        values = [float(w) for w in comma_list(text)]
    except ValueError:
        raise UserError(f"--widths takes numbers such as 0.5,1.5, got {text!r}") from None
    if not values or any(w <= 0 for w in values):
        raise UserError(f"--widths must be positive numbers, got {text!r}")
    return values


def byte_count(text: str) -> int:
    """``49152`` or ``48K`` (KiB) -> bytes."""
    t = str(text).strip().lower()
    scale = 1024 if t.endswith("k") else 1
    try:
        value = float(t.rstrip("k").rstrip("i").rstrip("b")) if scale == 1 else float(t[:-1])
    except ValueError:
        raise UserError(f"--smem must be a byte count such as 49152 or 48K, got {text!r}") from None
    return int(value * scale)


def dispatch(commands: dict, args) -> int:
    """Run the function of ``commands`` named by the parsed sub-command."""
    return commands[args.cmd](args)

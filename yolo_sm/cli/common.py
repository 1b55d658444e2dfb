"""What the ``yolo-sm`` command groups share: a parser whose errors are one sentence, common
flags, and the device check before any work."""

from __future__ import annotations

import argparse
import logging

from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import MODEL_HELP

#: the package's logger: progress and notices go through it to stderr (tables go to stdout)
log = logging.getLogger("yolo_sm")


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one sentence (argparse would add a usage block)."""

    def error(self, message):
        raise UserError(f"{message} (see '{self.prog} --help')")


def model_flags(p: argparse.ArgumentParser, many: bool = False) -> None:
    """--family, --width (--widths with ``many``), --imgsz, --device, --model, --input-shape."""
    p.add_argument("--family", default="yolov8", help="yolov8 or yolo11")
    if many:
        p.add_argument("--widths", default="1.0", help="comma list of width multipliers")
    else:
        p.add_argument("--width", default="1.0", help="width multiplier")
    p.add_argument("--imgsz", default="640", help="square input size (a multiple of 32)")
    p.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N")
    model_spec_flags(p)


def model_spec_flags(p: argparse.ArgumentParser) -> None:
    """--model SPEC (repeatable or a comma list) and --input-shape C,H,W."""
    more = "; repeatable; replaces --family/--widths"
    p.add_argument("--model", dest="models", action="append", help=MODEL_HELP + more)
    p.add_argument(
        "--input-shape",
        dest="input_shape",
        help="C,H,W of one input image, e.g. 3,640,640 (needed by a module:function model)",
    )


def comma_list(text: str | None) -> list[str]:
    """``"a,b,,c"`` -> ``["a", "b", "c"]``; None or empty -> ``[]``."""
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def byte_count(text, what: str = "--smem") -> int:
    """``49152``, ``48K`` or ``1.5K`` (KiB) -> a whole number of bytes."""
    t = str(text).strip().lower()
    kib = t.endswith(("k", "kib", "kb"))
    head = t.rstrip("bi").rstrip("k") if kib else t.removesuffix("b")
    n = values.number(head, what, lo=0) if head else None
    if n is None:
        raise UserError(f"{what} must be a byte count such as 49152 or 48K, got {text!r}")
    total = n * 1024 if kib else n
    if total != int(total):
        raise UserError(f"{what} must be a whole number of bytes, got {text!r}")
    return int(total)


def device(text, what: str = "--device", gpu_only: str = "") -> str:
    """A device that exists here (else NotAvailableError); ``gpu_only``: a command refusing cpu."""
    from yolo_sm.core.environment import check_device

    name = values.device_name(text, what)
    check_device(name, what, gpu_only)
    return name


def print_table(df, floats: str | None = "{:.4g}") -> None:
    """``df`` on stdout whole (every row and column), floats as ``floats`` (None: pandas')."""
    import pandas as pd

    opts = ["display.width", 250, "display.max_rows", None, "display.max_columns", None]
    opts += ["display.max_colwidth", 90, "display.float_format", floats and floats.format]
    with pd.option_context(*opts):
        print(df.to_string(index=False))

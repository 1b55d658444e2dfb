"""What the ``yolo-sm`` command groups share: the parser class whose errors are one sentence,
the verbosity and model flags, the parsers of flag values, and the checks every command makes
before any work: the device exists, the optional packages a backend needs are installed, the
output can be written."""

from __future__ import annotations

import argparse
import importlib.util
import logging

from yolo_sm.contract import values
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.values import MAX_BATCH, MAX_IMGSZ, MAX_WIDTH_ANY

#: the package's logger: progress and notices go through it to stderr (tables go to stdout)
log = logging.getLogger("yolo_sm")


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one sentence (argparse would add a usage block)."""

    def error(self, message):
        raise UserError(f"{message} (see '{self.prog} --help')")


def verbosity_flags(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` (no progress bars, warnings and errors only) and ``-v/--verbose`` (debug
    logs too), unless ``p`` has them already."""
    if any("--quiet" in a.option_strings for a in p._actions):
        return
    g = p.add_argument_group("output")
    g.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars or notes: warnings and errors"
    )
    g.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr too")


def model_flags(p: argparse.ArgumentParser, many: bool = False) -> None:
    """--family, --width (or --widths with ``many``), --imgsz, --device, and --model /
    --input-shape (:func:`model_spec_flags`) in place of the family and width."""
    p.add_argument("--family", default="yolov8", help="yolov8 or yolo11")
    if many:
        p.add_argument("--widths", default="1.0", help="comma list of width multipliers")
    else:
        p.add_argument("--width", default="1.0", help="width multiplier")
    p.add_argument("--imgsz", default="640", help="square input size (a multiple of 32)")
    p.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N")
    model_spec_flags(p)


def model_spec_flags(p: argparse.ArgumentParser) -> None:
    """--model SPEC (repeatable, or a comma list) and --input-shape C,H,W: any model
    (yolo_sm.core.models.spec), in place of the family and width flags."""
    p.add_argument(
        "--model",
        dest="models",
        action="append",
        help="family:width (yolov8:0.5, yolo11:n), an ultralytics model YAML by path or name "
        "(yolo11s-seg.yaml, rtdetr-l.yaml), an ultralytics .pt checkpoint or "
        "package.module:function (imports and runs your code, by design); repeatable or a "
        "comma list; replaces --family/--widths",
    )
    p.add_argument(
        "--input-shape",
        dest="input_shape",
        help="C,H,W of one input image, e.g. 3,640,640 (needed by a module:function model)",
    )


def comma_list(text: str | None) -> list[str]:
    """``"a,b,,c"`` -> ``["a", "b", "c"]``; None or empty -> ``[]``."""
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def widths(text, what: str = "--widths") -> list[float]:
    """A comma list of positive width multipliers."""
    return values.numbers(text, what, above=0, hi=MAX_WIDTH_ANY)


def batch(text, what: str = "--batch") -> int:
    return values.whole(text, what, lo=1, hi=MAX_BATCH)


def batches(text, what: str = "--batches") -> list[int]:
    return values.wholes(text, what, lo=1, hi=MAX_BATCH)


def imgsz(text, what: str = "--imgsz") -> int:
    size = values.whole(text, what, lo=32, hi=MAX_IMGSZ, unit="pixels")
    if size % 32:
        raise UserError(f"{what} must be a multiple of 32, got {size}")
    return size


def byte_count(text, what: str = "--smem") -> int:
    """``49152``, ``48K`` or ``1.5K`` (KiB) -> a whole number of bytes (``1.5`` bytes, ``nan``,
    a negative count: a UserError)."""
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
    """A device name that exists here: ``cpu``, or ``cuda`` / ``cuda:N`` when torch sees that
    GPU (a missing one is a NotAvailableError). ``gpu_only`` names a command that runs on a GPU
    alone: then ``cpu`` is refused too, and no advice points to it."""
    name = values.device_name(text, what)
    if gpu_only and not name.startswith("cuda"):
        raise UserError(f"{gpu_only} runs on a GPU only: use --device cuda on a machine with one")
    if name.startswith("cuda"):
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not count:
            advice = (
                f"{gpu_only} runs on a GPU only: run it on a machine with one"
                if gpu_only
                else "use --device cpu"
            )
            raise NotAvailableError(
                f"{what} {name} was requested but torch sees no CUDA GPU here; {advice}"
            )
        index = int(name.partition(":")[2] or 0)
        if index >= count:
            raise NotAvailableError(
                f"{what} {name} does not exist: torch sees {count} GPU(s) (cuda:0 to "
                f"cuda:{count - 1})"
            )
    return name


#: the optional package each backend needs
BACKEND_PACKAGES = {"tensorrt": "tensorrt", "onnxruntime": "onnxruntime"}


def backends_available(backends) -> None:
    """A NotAvailableError when a backend's optional package is not installed here."""
    for b in dict.fromkeys(str(x).split(":")[0].lower() for x in backends):
        pkg = BACKEND_PACKAGES.get(b)
        if pkg and importlib.util.find_spec(pkg) is None:
            raise NotAvailableError(
                f"backend {b} was requested but {pkg} is not installed here; leave it out or "
                f"install it"
            )


def output(path, what: str = "--out", folder: bool = False):
    """:func:`yolo_sm.contract.values.output_path`: ``path`` can be written (nothing created)."""
    return values.output_path(path, what, folder=folder)


def progress(args) -> bool:
    """Whether a command shows progress bars: not with ``--quiet``."""
    return not getattr(args, "quiet", False)


def dispatch(commands: dict, args) -> int:
    """Run the function of ``commands`` named by the parsed sub-command."""
    return commands[args.cmd](args)

"""``yolo-sm env`` (this machine's hardware, software and working profilers) and ``yolo-sm
models`` (a model's channel table)."""

from __future__ import annotations

import json
import sys

from yolo_sm.cli import common
from yolo_sm.cli.common import device, dispatch
from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError


def add_parser(sub) -> None:
    e = sub.add_parser(
        "env", help="what hardware and software this machine has, which profilers work"
    )
    e.add_argument(
        "--device", default=None, help="cpu, cuda or cuda:N (default: cuda if present, else cpu)"
    )
    e.add_argument("--json", action="store_true", help="print JSON instead of a table")
    e.set_defaults(run=run)

    m = sub.add_parser(
        "models",
        help="the channel table of a model (one row per layer); 'models save' writes a checkpoint",
    )
    m.add_argument(
        "action",
        nargs="?",
        choices=("table", "save"),
        default="table",
        help="table (default) or save: write --model as an ultralytics checkpoint to --out, "
        "random weights with BatchNorm calibrated on the bundled photos",
    )
    m.add_argument(
        "--model",
        help="a model spec instead of --family: yolov8:0.25, an ultralytics YAML by path or name "
        "(yolo11s-seg.yaml, rtdetr-l.yaml), best.pt, or package.module:function (imports and "
        "runs your code, by design)",
    )
    m.add_argument(
        "--input-shape",
        dest="input_shape",
        help="C,H,W of one image (needed by a module:function model); the table counts at it",
    )
    m.add_argument("--out", help="models save: the .pt file to write")
    m.add_argument(
        "--family",
        default="yolov8",
        help="yolov8, yolo11, wide (the wide conv stack) or resnet18/34/50/101/152",
    )
    m.add_argument("--width", default="1.0", help="width multiplier or preset letter n/s/m/l/x")
    m.add_argument("--depth", default=None, help="depth multiplier (default 0.33 / preset)")
    m.add_argument("--max-channels", default="2048", help="ultralytics max_channels cap")
    m.add_argument("--imgsz", default="640", help="square input size (a multiple of 32)")
    m.add_argument("--format", choices=("table", "csv", "json"), default="table")
    m.set_defaults(run=run)


def run(args) -> int:
    return dispatch({"env": env, "models": models_table}, args)


def env(args) -> int:
    # the default describes the GPU where there is one; a device asked for must exist here
    name = device(args.device) if args.device is not None else "cuda"
    from yolo_sm.core.environment import describe

    info = describe(name)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        width = max(len(k) for k in info)
        for k, v in info.items():
            print(f"{k:<{width}}  {v}")
    return 0


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def models_table(args) -> int:

    from yolo_sm.core import models

    if args.action == "save":
        return save(args)
    size = common.imgsz(args.imgsz)
    if args.model:
        spec = models.parse_model(args.model, args.input_shape)
        model = models.build_spec(spec)
        return _print_table(model, spec.imgsz or size, args)  # the shape given is the one counted
    fam = values.text(args.family, "--family").lower()
    if fam == "wide" and not is_number(str(args.width)):
        raise UserError(f"the wide conv stack takes a numeric --width, got {args.width!r}")
    width = values.text(args.width, "--width")
    if is_number(width):
        width = common.widths(width, "--width")[0]
    depth = values.number(args.depth, "--depth", above=0, hi=4) if args.depth is not None else None
    max_channels = values.whole(args.max_channels, "--max-channels", lo=1, hi=1 << 20)
    model = models.build(fam, width, depth=depth, max_channels=max_channels)
    return _print_table(model, size, args)


def _print_table(model, size: int, args) -> int:
    import pandas as pd

    from yolo_sm.core import models

    df = models.channel_table(model, size)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        print(df.to_json(orient="records"))
    else:
        with pd.option_context(
            "display.width", 200, "display.max_columns", 50, "display.max_rows", 500
        ):
            print(df.to_string(index=False))
        print(
            f"\ntotal: {df.params.sum():,} parameters, {df.flops.sum() / 1e9:.2f} GFLOPs per "
            f"{size}x{size} image (2 FLOPs per multiply-add)"
        )
    return 0


def save(args) -> int:
    from yolo_sm.core.models import save_checkpoint

    if not args.model or not args.out:
        raise UserError("models save needs --model (e.g. yolov8:0.25) and --out FILE.pt")
    out = values.output_path(args.out, "--out")
    path = save_checkpoint(args.model, out)
    print(f"wrote {path}")
    return 0

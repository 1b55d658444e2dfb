"""``yolo-sm env`` (this machine's hardware, software and working profilers) and ``yolo-sm
models`` (a model's channel table)."""

from __future__ import annotations

import json
import sys

from yolo_sm.cli.common import device, print_table
from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError


def add_parser(sub) -> None:
    e = sub.add_parser("env", help="this machine's hardware and software, which profilers work")
    e.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    e.add_argument("--json", action="store_true", help="print JSON instead of a table")
    e.set_defaults(run=env)

    m = sub.add_parser("models", help="a model's channel table; 'models save' writes a checkpoint")
    arg = m.add_argument
    save_help = "table (default) or save: write --model as an ultralytics checkpoint to --out"
    arg("action", nargs="?", choices=("table", "save"), default="table", help=save_help)
    arg("--model", help="a model spec instead of --family: yolov8:0.25, a YAML, best.pt, mod:fn")
    arg("--input-shape", dest="input_shape", help="C,H,W of one image (module:function models)")
    arg("--out", help="models save: the .pt file to write")
    arg("--family", default="yolov8", help="yolov8, yolo11, wide or resnet18/34/50/101/152")
    arg("--width", default="1.0", help="width multiplier or preset letter n/s/m/l/x")
    arg("--depth", help="depth multiplier (default 0.33 / preset)")
    arg("--max-channels", default="2048", help="ultralytics max_channels cap")
    arg("--imgsz", default="640", help="square input size (a multiple of 32)")
    arg("--format", choices=("table", "csv", "json"), default="table")
    m.set_defaults(run=models_table)


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
        if not args.model or not args.out:
            raise UserError("models save needs --model (e.g. yolov8:0.25) and --out FILE.pt")
        path = models.save_checkpoint(args.model, values.output_path(args.out, "--out"))
        print(f"wrote {path}")
        return 0
    size = values.imgsz(args.imgsz, "--imgsz")
    if args.model:
        spec = models.parse_model(args.model, args.input_shape)
        model = models.build_spec(spec)
        return _print_table(model, spec.imgsz or size, args)  # the shape given is the one counted
    fam = values.text(args.family, "--family").lower()
    if fam == "wide" and not is_number(str(args.width)):
        raise UserError(f"the wide conv stack takes a numeric --width, got {args.width!r}")
    width = values.text(args.width, "--width")
    if is_number(width):
        width = values.multiplier(width, "--width")
    depth = values.number(args.depth, "--depth", above=0, hi=4) if args.depth is not None else None
    max_channels = values.whole(args.max_channels, "--max-channels", lo=1, hi=1 << 20)
    model = models.build(fam, width, depth=depth, max_channels=max_channels)
    return _print_table(model, size, args)


def _print_table(model, size: int, args) -> int:
    from yolo_sm.core import models

    df = models.channel_table(model, size)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        print(df.to_json(orient="records"))
    else:
        print_table(df, floats=None)
        print(
            f"\ntotal: {df.params.sum():,} parameters, {df.flops.sum() / 1e9:.2f} GFLOPs per "
            f"{size}x{size} image (2 FLOPs per multiply-add)"
        )
    return 0

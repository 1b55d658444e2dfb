"""A program to profile: eager forwards of one or more configs, each inside NVTX ranges
``profiled_forward/<config>/<layer>`` (warm-up and cuDNN autotuning stay outside them).

``yolo-sm ncu`` runs it under Nsight Compute; it also runs alone (``python -m
yolo_sm.collect.profiling.target --help``).
"""

from __future__ import annotations

import argparse
import sys

from yolo_sm.collect.engines import EngineConfig, build_engine
from yolo_sm.collect.models import build
from yolo_sm.collect.profiling.nvtx import forward_range, layer_ranges
from yolo_sm.contract.labels import config_label


def target_argv(family, widths, precisions, layouts, batches, imgsz, device) -> list[str]:
    """The command line that runs this module (what ``yolo-sm ncu`` hands to ncu)."""
    return [
        sys.executable,
        "-m",
        "yolo_sm.collect.profiling.target",
        "--family",
        str(family),
        "--widths",
        str(widths),
        "--precisions",
        str(precisions),
        "--layouts",
        str(layouts),
        "--batches",
        str(batches),
        "--imgsz",
        str(imgsz),
        "--device",
        str(device),
    ]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m yolo_sm.collect.profiling.target")
    p.add_argument("--family", default="yolov8")
    p.add_argument("--widths", default="1.0", help="comma list of width multipliers")
    p.add_argument("--precisions", default="fp16")
    p.add_argument("--layouts", default="nhwc")
    p.add_argument("--batches", default="8")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--device", default="cuda")
    p.add_argument(
        "--no-layers",
        dest="layers",
        action="store_false",
        help="no per-layer ranges (one range per config)",
    )
    return p


def configs(args):
    for w in [float(x) for x in args.widths.split(",")]:
        for prec in args.precisions.split(","):
            for lay in args.layouts.split(","):
                for b in [int(x) for x in args.batches.split(",")]:
                    yield w, prec, lay, b


def main(argv=None) -> int:
    import contextlib

    import torch

    args = build_parser().parse_args(argv)
    models = {}
    for w, prec, lay, b in configs(args):
        model = models.setdefault(w, build(args.family, w))
        cfg = EngineConfig(
            precision=prec, layout=lay, batch=b, imgsz=args.imgsz, device=args.device, check=False
        )
        eng = build_engine(model, cfg)
        x = eng.make_input(0)
        for _ in range(2):
            eng(x)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        label = config_label(args.family, w, prec, lay, b)
        # the engine runs a prepared copy of the model: hook that copy's layers
        use = args.layers and eng.module is not None
        ranges = layer_ranges(eng.module) if use else contextlib.nullcontext()
        with forward_range(), forward_range(label), ranges:
            eng(x)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
        print(f"profiled {label}", flush=True)
        eng.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

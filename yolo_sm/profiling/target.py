"""A program to profile: eager forwards of one or more configs, each inside NVTX ranges
``profiled_forward/<config>/<layer>`` (warm-up and cuDNN autotuning stay outside them).

``yolo-sm ncu`` runs it under Nsight Compute; it also runs alone (``python -m
yolo_sm.profiling.target --help``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys


def config_label(family, width, precision, layout, batch) -> str:
    return f"{family}_w{width:g}_{precision}_{layout}_b{batch}"


_CONFIG_LABEL = re.compile(
    r"^(?P<family>[a-z0-9]+?)_w(?P<width>[0-9.]+)_(?P<precision>[a-z0-9]+)_"
    r"(?P<layout>nchw|nhwc)_b(?P<batch>[0-9]+)$"
)


def parse_config(label: str, strict: bool = True) -> dict:
    """The inverse of :func:`config_label`: ``"yolov8_w1.5_fp16_nhwc_b8"`` -> family, width
    (float), precision, layout, batch (int). Another form raises ValueError, or with
    ``strict=False`` gives None / NaN fields (e.g. the empty label of an idle GPM phase)."""
    m = _CONFIG_LABEL.match(str(label))
    if m:
        d = m.groupdict()
        return {**d, "width": float(d["width"]), "batch": int(d["batch"])}
    if strict:
        raise ValueError(f"not a config label like yolov8_w1.5_fp16_nhwc_b8: {label!r}")
    return {"family": None, "width": math.nan, "precision": None, "layout": None, "batch": math.nan}


def with_config(df, col: str = "config", strict: bool = False):
    """A copy of ``df`` with family, width, precision, layout and batch parsed from ``col``
    (replacing columns of those names)."""
    import pandas as pd

    parsed = pd.DataFrame([parse_config(c, strict) for c in df[col]], index=df.index)
    return df.drop(columns=[c for c in parsed if c in df]).join(parsed)


def target_argv(family, widths, precisions, layouts, batches, imgsz, device) -> list[str]:
    """The command line that runs this module (what ``yolo-sm ncu`` hands to ncu)."""
    return [
        sys.executable,
        "-m",
        "yolo_sm.profiling.target",
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
    p = argparse.ArgumentParser(prog="python -m yolo_sm.profiling.target")
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

    from yolo_sm.engines import EngineConfig, build_engine
    from yolo_sm.models import build
    from yolo_sm.profiling.nvtx import forward_range, layer_ranges

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

"""A program to profile: eager forwards of configs inside NVTX ranges
``profiled_forward/<config>/<layer>`` (run by ``yolo-sm ncu``, or alone with ``--help``).
"""

from __future__ import annotations

import argparse
import sys

from yolo_sm.contract.labels import config_label
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.models import build
from yolo_sm.core.models.spec import ModelSpec, build_spec, label_parts, parse_models
from yolo_sm.core.profiling.nvtx import forward_range, layer_ranges


def target_argv(
    family, widths, precisions, layouts, batches, imgsz, device, models=None, input_shape=None
) -> list[str]:
    """The command line that runs this module (what ``yolo-sm ncu`` hands to ncu); ``models``
    (specs, collect.models.spec) replace family and widths."""
    extra = []
    if models:
        specs = parse_models(models, input_shape, need_shape=False)
        texts = [m.text for m in specs]
        extra = ["--model", ",".join(texts)]
    if input_shape:
        shape = input_shape if isinstance(input_shape, str) else ",".join(map(str, input_shape))
        extra += ["--input-shape", shape]
    return [
        sys.executable,
        "-m",
        "yolo_sm.core.profiling.target",
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
        *extra,
    ]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m yolo_sm.core.profiling.target")
    p.add_argument("--family", default="yolov8")
    p.add_argument("--widths", default="1.0", help="comma list of width multipliers")
    p.add_argument("--precisions", default="fp16")
    p.add_argument("--layouts", default="nhwc")
    p.add_argument("--batches", default="8")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--device", default="cuda")
    p.add_argument("--model", default="", help="comma list of model specs (replaces --widths)")
    p.add_argument("--input-shape", dest="input_shape", default=None, help="C,H,W")
    p.add_argument(
        "--no-layers",
        dest="layers",
        action="store_false",
        help="no per-layer ranges (one range per config)",
    )
    return p


def configs(args):
    """(model, precision, layout, batch) per config: the model is a width of ``--family``, or a
    :class:`ModelSpec` of ``--model`` (a module:function without ``--input-shape`` runs at
    3 x imgsz x imgsz)."""
    keys = list(parse_models(args.model, args.input_shape, False)) if args.model else None
    for w in keys or [float(x) for x in args.widths.split(",")]:
        for prec in args.precisions.split(","):
            for lay in args.layouts.split(","):
                for b in [int(x) for x in args.batches.split(",")]:
                    yield w, prec, lay, b


def model_of(family: str, key, imgsz: int):
    """The model of a config key: a width of ``family`` or a :class:`ModelSpec` (a module spec
    without an input shape gets ``3,imgsz,imgsz``)."""
    if isinstance(key, ModelSpec):
        return build_spec(key, input_shape=key.input_shape or (3, imgsz, imgsz))
    return build(family, key)


def label_of(family: str, key) -> tuple[str, float]:
    """(family, width) of a config key for :func:`config_label`."""
    return label_parts(key) if isinstance(key, ModelSpec) else (family, float(key))


def main(argv=None) -> int:
    import contextlib

    import torch

    args = build_parser().parse_args(argv)
    models = {}
    for w, prec, lay, b in configs(args):
        model = models.setdefault(w, model_of(args.family, w, args.imgsz))
        imgsz = w.imgsz if isinstance(w, ModelSpec) and w.imgsz else args.imgsz
        cfg = EngineConfig(
            precision=prec, layout=lay, batch=b, imgsz=imgsz, device=args.device, check=False
        )
        eng = build_engine(model, cfg)
        x = eng.make_input(0)
        for _ in range(2):
            eng(x)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        label = config_label(*label_of(args.family, w), prec, lay, b)
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

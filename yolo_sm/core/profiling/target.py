"""The engines of a grid of (model, precision, layout, batch) configs, and a program to profile:
their eager forwards inside NVTX ranges ``profiled_forward/<config>/<layer>`` (run by
``yolo-sm ncu``, or alone with ``--help``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys

from yolo_sm.contract.labels import config_label
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.models.spec import ModelSpec, build, build_spec, label_parts, parse_models
from yolo_sm.core.profiling.nvtx import forward_range, layer_ranges


def model_of(family: str, key, imgsz: int):
    """The model of a config key: a width of ``family`` or a :class:`ModelSpec` (a module spec
    without an input shape gets ``3,imgsz,imgsz``)."""
    if isinstance(key, ModelSpec):
        return build_spec(key, input_shape=key.input_shape or (3, imgsz, imgsz))
    return build(family, key)


def label_of(family: str, key) -> tuple[str, float]:
    """(family, width) of a config key for :func:`config_label`."""
    return label_parts(key) if isinstance(key, ModelSpec) else (family, float(key))


def engine_of(
    family, config, model, imgsz, device, backend="eager", compile_mode="default", check=True
):
    """(engine, input) of one (width or model spec, precision, layout, batch) ``config`` of
    ``model``; the input is the engine's static one where it has one."""
    w, prec, lay, b = config
    size = w.imgsz if isinstance(w, ModelSpec) and w.imgsz else imgsz
    cfg = EngineConfig(backend, prec, lay, b, size, device, compile_mode, check=check)
    eng = build_engine(model, cfg)
    return eng, (eng._input if eng._input is not None else eng.make_input(0))


def engines(family, grid, imgsz, device, backend="eager", compile_mode="default", check=True):
    """(label, engine, input) per config of ``grid`` (:func:`engine_of`), one model per key."""
    models = {}
    for config in grid:
        if config[0] not in models:
            models[config[0]] = model_of(family, config[0], imgsz)
        eng, x = engine_of(family, config, models[config[0]], imgsz, device, backend,
                           compile_mode, check)  # fmt: skip
        yield config_label(*label_of(family, config[0]), *config[1:]), eng, x


def target_argv(
    family, widths, precisions, layouts, batches, imgsz, device, models=None, input_shape=None
) -> list[str]:
    """The command line that runs this module (what ``yolo-sm ncu`` hands to ncu); ``models``
    (model specs) replace family and widths."""
    argv = [sys.executable, "-m", "yolo_sm.core.profiling.target", "--family", str(family)]
    for flag, value in zip(
        ("--widths", "--precisions", "--layouts", "--batches", "--imgsz", "--device"),
        (widths, precisions, layouts, batches, imgsz, device),
        strict=True,
    ):
        argv += [flag, str(value)]
    if models:
        argv += ["--model", ",".join(m.text for m in parse_models(models, input_shape, False))]
    if input_shape:
        shape = input_shape if isinstance(input_shape, str) else ",".join(map(str, input_shape))
        argv += ["--input-shape", shape]
    return argv


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
    """(width of ``--family`` or :class:`ModelSpec` of ``--model``, precision, layout, batch)
    per config."""
    keys = list(parse_models(args.model, args.input_shape, False)) if args.model else None
    return itertools.product(
        keys or [float(x) for x in args.widths.split(",")],
        args.precisions.split(","),
        args.layouts.split(","),
        [int(x) for x in args.batches.split(",")],
    )


def main(argv=None) -> int:
    import torch

    args = build_parser().parse_args(argv)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    for label, eng, x in engines(args.family, configs(args), args.imgsz, args.device, check=False):
        for _ in range(2):
            eng(x)
        sync()
        # the engine runs a prepared copy of the model: hook that copy's layers
        use = args.layers and eng.module is not None
        with forward_range(), forward_range(label):
            with layer_ranges(eng.module) if use else contextlib.nullcontext():
                eng(x)
                sync()
        print(f"profiled {label}", flush=True)
        eng.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

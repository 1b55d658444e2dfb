"""``yolo-sm`` command line: thin sub-commands over the package's functions.

Errors a user can cause end in one sentence on stderr and exit code 2, with no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import load_yaml


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one sentence, exit 2 (argparse would add a usage block)
        raise UserError(f"{message} (see '{self.prog} --help')")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="yolo-sm", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    e = sub.add_parser(
        "env", help="what hardware and software this machine has, which profilers work"
    )
    e.add_argument("--device", default="cuda", help="device to describe (default cuda, if present)")
    e.add_argument("--json", action="store_true", help="print JSON instead of a table")

    m = sub.add_parser("models", help="the channel table of a model (one row per layer)")
    m.add_argument(
        "--family",
        default="yolov8",
        help="yolov8, yolo11, wide (the wide conv stack) or resnet18/34/50/101/152",
    )
    m.add_argument("--width", default="1.0", help="width multiplier or preset letter n/s/m/l/x")
    m.add_argument(
        "--depth", type=float, default=None, help="depth multiplier (default 0.33 / preset)"
    )
    m.add_argument("--max-channels", type=int, default=2048)
    m.add_argument("--imgsz", type=int, default=640)
    m.add_argument("--format", choices=("table", "csv", "json"), default="table")

    s = sub.add_parser("sweep", help="time a grid of model x engine x batch points into parquet")
    s.add_argument("--config", help="YAML file with the same keys as the flags (flags override it)")
    for flag, helptext in (
        ("--family", "comma list: yolov8,yolo11"),
        ("--widths", "comma list of multipliers (0.0625-4) or presets n,s,m,l,x"),
        ("--depth", "comma list of depth multipliers (default 0.33 / preset depth)"),
        ("--precisions", "comma list: fp32,tf32,fp16,bf16 (int8: tensorrt only)"),
        ("--layouts", "comma list: nchw,nhwc"),
        ("--backends", "comma list: eager,cudagraph,compile,onnxruntime,tensorrt"),
        ("--batches", "comma list of batch sizes"),
        ("--imgsz", "comma list of square input sizes (multiples of 32)"),
    ):
        s.add_argument(flag, help=helptext)
    s.add_argument("--device", help="cuda (default) or cpu")
    s.add_argument(
        "--max-channels", dest="max_channels", help="ultralytics max_channels cap (default 2048)"
    )
    s.add_argument(
        "--compile-mode", dest="compile_mode", help="torch.compile mode (default 'default')"
    )
    s.add_argument(
        "--budget-ms", dest="budget_ms", help="timed milliseconds per point (default 300)"
    )
    s.add_argument(
        "--warmup-ms", dest="warmup_ms", help="warm-up milliseconds per point (default 50)"
    )
    s.add_argument(
        "--no-check",
        dest="check",
        action="store_const",
        const=False,
        help="skip the numerical check against eager fp32",
    )
    s.add_argument("--out", required=False, help="parquet file; rerunning resumes it")
    s.add_argument("--quiet", action="store_true", help="no progress bar")

    t = sub.add_parser("trace", help="PyTorch profiler trace of one model/engine config")
    _model_flags(t)
    t.add_argument("--backend", default="eager", help="eager, cudagraph or compile")
    t.add_argument("--precision", default="fp16")
    t.add_argument("--layout", default="nhwc")
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--iters", type=int, default=3, help="profiled forwards")
    t.add_argument("--out", required=True, help="trace file (.json.gz); provenance goes beside it")

    n = sub.add_parser("ncu", help="Nsight Compute per-kernel table of NVTX-scoped forwards")
    _model_flags(n, many=True)
    n.add_argument("--precisions", default="fp16")
    n.add_argument("--layouts", default="nhwc")
    n.add_argument("--batches", default="8")
    n.add_argument("--metric-set", default="occupancy", help="occupancy, throughput or full")
    n.add_argument("--timeout", type=float, default=600, help="seconds before ncu is stopped")
    n.add_argument("--out", required=True, help="CSV file (ncu --csv --page raw)")

    g = sub.add_parser("gpm", help="NVML GPM timeline of one config running for some seconds")
    _model_flags(g, many=True)
    g.add_argument("--precision", default="fp16")
    g.add_argument("--layout", default="nhwc")
    g.add_argument("--batch", type=int, default=16)
    g.add_argument("--seconds", type=float, default=3.0, help="per width")
    g.add_argument("--hz", type=float, default=20.0, help="polling rate (GPM refreshes ~10 Hz)")
    g.add_argument(
        "--overhead-rounds",
        type=int,
        default=0,
        help="then measure the sampler's cost on throughput: N paired rounds per width",
    )
    g.add_argument("--out", required=True, help="parquet file (tidy: one row per window x metric)")

    a = sub.add_parser(
        "profile", help="Kineto + Nsight Compute + GPM on each width, joined per layer"
    )
    _model_flags(a, many=True)
    a.set_defaults(widths="0.5,1.5")
    a.add_argument("--precision", default="fp16")
    a.add_argument("--layout", default="nhwc")
    a.add_argument("--batch", type=int, default=8)
    a.add_argument("--metric-set", default="occupancy", help="ncu set: occupancy/throughput/full")
    a.add_argument("--gpm-seconds", type=float, default=3.0)
    a.add_argument("--out", required=True, help="folder for the tables, traces and summary.json")

    c = sub.add_parser("collect", help="run a collection plan (resumable, splittable)")
    c.add_argument("--plan", required=True, help="plan YAML, e.g. data/plans/h200.yaml")
    c.add_argument("--out", required=True, help="dataset folder, e.g. data/h200")
    c.add_argument("--only", default=None, help="comma list of step names")
    c.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop before work that would end later (the H200 allows 10 per command)",
    )
    c.add_argument(
        "--redo-errors",
        nargs="?",
        const="",
        default=None,
        metavar="TEXT",
        help="measure again the error rows (not oom) of the sweep and bench steps it runs, or "
        "only those whose message contains TEXT (e.g. NumericalMismatch); a bench re-measures "
        "such a row's whole (model, batch) unit",
    )
    c.add_argument("--status", action="store_true", help="only show which steps are done")
    c.add_argument("--quiet", action="store_true", help="no progress bars")

    b = sub.add_parser(
        "bench", help="side-by-side: baseline, engines, pipeline, ultralytics predict"
    )
    b.add_argument("--models", default="yolov8:0.5", help="comma list of family:width")
    b.add_argument("--batches", default="1,16,64", help="comma list of batch sizes")
    b.add_argument(
        "--engines",
        default="cudagraph/fp16/nhwc,compile/fp16/nhwc",
        help="comma list of backend/precision/layout besides eager/fp16/nhwc "
        "(compile:MODE/... picks a torch.compile mode)",
    )
    b.add_argument(
        "--streams", default="1,3", help="comma list: one pipeline row per batches-in-flight count"
    )
    b.add_argument("--device", default="cuda")
    b.add_argument("--seconds", type=float, default=2.0, help="per pipeline / predict row")
    b.add_argument(
        "--no-predict",
        dest="predict",
        action="store_false",
        help="skip ultralytics' YOLO.predict rows",
    )
    b.add_argument(
        "--out",
        required=True,
        help="parquet file for the table (a rerun skips the (model, batch) pairs it holds)",
    )

    m = sub.add_parser(
        "remeasure", help="re-measure random points of a shipped sweep and compare (within 10 %?)"
    )
    m.add_argument("--dataset", required=True, help="a sweep dataset, e.g. h200/sweep_fp16_nhwc")
    m.add_argument("--points", type=int, default=5, help="how many random ok points")
    m.add_argument("--seed", type=int, default=0, help="the draw's seed (reproducible)")
    m.add_argument("--device", default=None, help="override the points' device (cpu: dry run)")
    m.add_argument("--out", default=None, help="parquet file for the comparison table")
    m.add_argument("--quiet", action="store_true", help="no progress bar")

    o = sub.add_parser("occupancy", help="theoretical occupancy of a launch (what-if calculator)")
    o.add_argument("--cc", default="9.0", help="compute capability, e.g. 9.0 (H100/H200), 8.0")
    o.add_argument("--threads", type=int, required=True, help="threads per block")
    o.add_argument("--registers", type=int, default=32, help="registers per thread")
    o.add_argument(
        "--smem",
        default="0",
        help="shared memory per block (static + dynamic): bytes, or with a K suffix for KiB",
    )
    o.add_argument("--grid", type=int, default=None, help="blocks in the grid (prints waves)")
    o.add_argument("--sm-count", type=int, default=132, help="SMs for the wave count (H200: 132)")
    o.add_argument(
        "--vary",
        choices=("threads_per_block", "registers_per_thread", "shared_mem_per_block"),
        help="print the what-if curve",
    )

    r = sub.add_parser("render", help="execute the notebooks and render them into a static site")
    r.add_argument("--notebooks", default="notebooks", help="folder of NN_topic.ipynb files")
    r.add_argument("--out", default="site", help="output folder (index.html + one page each)")
    r.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    r.add_argument("--only", default=None, help="comma list of notebook name prefixes to render")
    return p


def _model_flags(p, many: bool = False) -> None:
    p.add_argument("--family", default="yolov8", help="yolov8 or yolo11")
    if many:
        p.add_argument("--widths", default="1.0", help="comma list of width multipliers")
    else:
        p.add_argument("--width", type=float, default=1.0, help="width multiplier")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--device", default="cuda")


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        from yolo_sm.cli import profiling as prof

        commands = {
            "trace": prof.cmd_trace,
            "bench": prof.cmd_bench,
            "collect": prof.cmd_collect,
            "ncu": prof.cmd_ncu,
            "gpm": prof.cmd_gpm,
            "profile": prof.cmd_profile,
            "env": cmd_env,
            "models": cmd_models,
            "sweep": cmd_sweep,
            "occupancy": prof.cmd_occupancy,
            "render": cmd_render,
            "remeasure": cmd_remeasure,
        }
        return commands[args.cmd](args)
    except UserError as e:
        print(f"yolo-sm: error: {_sentence(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("yolo-sm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0


def _sentence(e: Exception) -> str:
    text = " ".join(str(e).split())
    return text if text.endswith((".", ")", "'")) else text + "."


def cmd_remeasure(args) -> int:
    from yolo_sm.collect.remeasure import remeasure, summary

    df = remeasure(
        args.dataset,
        n=args.points,
        seed=args.seed,
        device=args.device,
        out=args.out,
        progress=not args.quiet,
    )
    cols = ["width", "precision", "layout", "backend", "batch", "shipped_img_per_s"]
    cols += ["new_img_per_s", "ratio", "within_10pct", "launch_bound", "status"]
    print(df[cols].round(3).to_string(index=False))
    print(summary(df))
    return 0


def cmd_env(args) -> int:
    from yolo_sm.collect.environment import describe

    info = describe(args.device)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        width = max(len(k) for k in info)
        for k, v in info.items():
            print(f"{k:<{width}}  {v}")
    return 0


def cmd_models(args) -> int:
    import pandas as pd

    from yolo_sm.collect import models

    fam = args.family.lower()
    if fam == "wide" and not models._is_number(str(args.width)):
        raise UserError(f"the wide conv stack takes a numeric --width, got {args.width!r}")
    model = models.build(fam, args.width, depth=args.depth, max_channels=args.max_channels)
    if args.imgsz <= 0 or args.imgsz % 32:
        raise UserError(f"imgsz must be a positive multiple of 32, got {args.imgsz}")
    df = models.channel_table(model, args.imgsz)
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
            f"{args.imgsz}x{args.imgsz} image (2 FLOPs per multiply-add)"
        )
    return 0


def cmd_sweep(args) -> int:
    from yolo_sm.collect.sweep import SweepSpec, check_environment, check_output_path, run_sweep

    data = load_yaml(args.config) if args.config else {}
    out = args.out or data.pop("out", None)
    data.pop("out", None)
    for key in (
        "family",
        "widths",
        "depth",
        "precisions",
        "layouts",
        "backends",
        "batches",
        "imgsz",
        "device",
        "max_channels",
        "compile_mode",
        "budget_ms",
        "warmup_ms",
        "check",
    ):
        value = getattr(args, key, None)
        if value is not None:
            data[key] = value
    if not out:
        raise UserError("sweep needs --out FILE.parquet (or 'out:' in the config)")
    spec = SweepSpec.from_mapping(data)
    # every check that can fail comes before the skip notices: an error is the only stderr line
    check_environment(spec)
    check_output_path(out)
    if not spec.points():
        raise UserError("no point of the grid can run: " + "; ".join(spec.unsupported()))
    for line in spec.unsupported():
        print(f"yolo-sm: skipping {line}", file=sys.stderr)
    df = run_sweep(spec, out, progress=not args.quiet)
    _print_sweep_summary(df)
    return 0


def _print_sweep_summary(df) -> None:
    import pandas as pd

    if df.empty:
        print("no points")
        return
    cols = [
        c
        for c in (
            "family",
            "scale",
            "width",
            "precision",
            "layout",
            "backend",
            "batch",
            "imgsz",
            "status",
            "median_ms",
            "iqr_ms",
            "img_per_s",
            "tflops",
            "rel_err",
        )
        if c in df
    ]
    with pd.option_context(
        "display.width", 200, "display.max_rows", 1000, "display.float_format", "{:.4g}".format
    ):
        print(df[cols].to_string(index=False))
    counts = df["status"].value_counts().to_dict()
    print("points: " + ", ".join(f"{v} {k}" for k, v in counts.items()))


def cmd_render(args) -> int:
    from yolo_sm.report.render import render_site

    only = [x for x in (args.only or "").split(",") if x]
    index = render_site(args.notebooks, args.out, timeout=args.timeout, only=only)
    print(f"rendered {index}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

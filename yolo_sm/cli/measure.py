"""``yolo-sm sweep`` (a grid of timed points), ``yolo-sm bench`` (engines side by side) and
``yolo-sm remeasure`` (random points of a shipped sweep measured again: a gate)."""

from __future__ import annotations

from yolo_sm.analyse.hostbound import TOLERANCE
from yolo_sm.cli import common
from yolo_sm.cli.common import (
    backends_available,
    device,
    dispatch,
    log,
    model_spec_flags,
    output,
    progress,
)
from yolo_sm.contract import datasets, values
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.plans import (
    MAX_BUDGET_MS,
    MAX_RUN_S,
    MAX_WARMUP_MS,
    check_params,
    load_yaml,
)
from yolo_sm.contract.vocab import PIPELINE_MODES
from yolo_sm.topics.deploy.recommend import deploy, deploy_line, ranking

#: sweep settings a flag can set (flags override the --config YAML)
SWEEP_KEYS = (
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
    "models",
    "input_shape",
)
#: exit code of `yolo-sm remeasure` when a point lands outside the tolerance (2: a user error)
OUTSIDE_TOLERANCE = 1


def add_parser(sub) -> None:
    _sweep_parser(sub)
    _bench_parser(sub)
    _remeasure_parser(sub)


def run(args) -> int:
    return dispatch({"sweep": sweep, "bench": bench, "remeasure": remeasure}, args)


def _sweep_parser(sub) -> None:
    s = sub.add_parser("sweep", help="time a grid of model x engine x batch points into parquet")
    s.add_argument("--config", help="YAML file with the same keys as the flags (flags override it)")
    for flag, helptext in (
        ("--family", "comma list: yolov8,yolo11"),
        ("--widths", "comma list of multipliers (0.0625-4) or presets n,s,m,l,x"),
        ("--depth", "comma list of depth multipliers (default 0.33 / preset depth)"),
        ("--precisions", "comma list: fp32,tf32,fp16,bf16,fp8,int8"),
        ("--layouts", "comma list: nchw,nhwc"),
        ("--backends", "comma list: eager,cudagraph,compile,onnxruntime,tensorrt"),
        ("--batches", "comma list of batch sizes"),
        ("--imgsz", "comma list of square input sizes (multiples of 32)"),
    ):
        s.add_argument(flag, help=helptext)
    model_spec_flags(s)
    s.add_argument("--device", help="cuda (default) or cpu")
    s.add_argument(
        "--max-channels", dest="max_channels", help="ultralytics max_channels cap (default 2048)"
    )
    s.add_argument(
        "--compile-mode",
        dest="compile_mode",
        help="torch.compile mode (default 'default'); MODE+sep-pool first rewrites each "
        "stride-1 max pool as two 1-D pools (exact)",
    )
    s.add_argument(
        "--budget-ms",
        dest="budget_ms",
        help=f"timed milliseconds per point (default 300, at most {MAX_BUDGET_MS:g})",
    )
    s.add_argument(
        "--warmup-ms",
        dest="warmup_ms",
        help=f"warm-up milliseconds per point (default 50, at most {MAX_WARMUP_MS:g})",
    )
    s.add_argument(
        "--check",
        choices=("on", "off"),
        help="on (default): each engine's output must match eager fp32 within its precision's "
        "tolerance; off: time without the check (a model with random weights whose output "
        "differs by design, e.g. RT-DETR's query selection); its rows say check_input off",
    )
    s.add_argument(
        "--no-check",
        dest="check",
        action="store_const",
        const="off",
        help="the same as --check off",
    )
    s.add_argument("--out", required=False, help="parquet file; rerunning resumes it")
    s.set_defaults(run=run)


#: what ``yolo-sm bench`` runs without engine flags (collect.bench.BenchSpec's defaults; a test
#: holds the two together: this module does not import torch to build its parser)
BENCH_DEFAULTS = {
    "batches": "1,16,64",
    "engines": "cudagraph/fp16/nhwc,compile/fp16/nhwc,compile:reduce-overhead/fp16/nhwc",
    "pipeline_engine": "compile/fp16/nhwc",
    "streams": "1,3",
    "pipeline": "graph",
    "seconds": "1.0",
}


def _bench_parser(sub) -> None:
    d = BENCH_DEFAULTS
    b = sub.add_parser(
        "bench",
        help="rank the paths you would deploy: model-only engines, the frames-to-boxes "
        "pipeline, ultralytics predict",
        description="Measure, side by side in one process per (model, batch), the eager fp16 "
        "NHWC baseline, the model-only engines (--engines), the frames-to-boxes pipeline "
        "(uint8 frames in pinned memory to boxes on the host) around --pipeline-engine and "
        "ultralytics' YOLO.predict; print them ranked by images per second and one line per "
        "(model, batch) saying which frames-to-boxes path to deploy and how it compares with "
        "the fastest model-only engine. With the defaults a GPU takes about a minute per "
        "(model, batch), the first of a model longer while torch.compile builds (about 2 to 3 "
        "minutes for one model at three batches); a rerun skips what --out holds.",
    )
    b.add_argument(
        "--models",
        "--model",
        default="yolov8:0.5",
        help="comma list of family:width, model .yaml or ultralytics .pt (YOLO detectors)",
    )
    b.add_argument("--batches", help=f"comma list of batch sizes (default {d['batches']})")
    b.add_argument(
        "--engines",
        help="comma list of backend/precision/layout besides eager/fp16/nhwc "
        "(compile:MODE/... picks a torch.compile mode; MODE+sep-pool first rewrites the "
        f"model's stride-1 max pools as two 1-D pools, exactly; default {d['engines']})",
    )
    b.add_argument(
        "--pipeline-engine",
        help="backend[:mode]/precision/layout of the engine the pipeline rows wrap (a CPU runs "
        f"eager/fp32/nhwc; default {d['pipeline_engine']})",
    )
    b.add_argument(
        "--streams",
        help=f"comma list: one pipeline row per batches-in-flight count (default {d['streams']})",
    )
    b.add_argument(
        "--pipeline",
        help="comma list of pipeline modes, one row per mode and stream count: full (the full "
        "NMS), topk (NMS first on each frame's --nms-topk best candidates in fixed-size "
        "buffers, the full NMS where that is not exact), graph (topk with everything after the "
        f"copy to the device in one CUDA graph; default {d['pipeline']})",
    )
    b.add_argument(
        "--nms-topk",
        default="1024",
        help="candidates per frame of the fixed-size NMS of the topk and graph modes",
    )
    b.add_argument("--device", default="cuda")
    b.add_argument(
        "--seconds",
        help=f"wall time of each pipeline / predict row (at most {MAX_RUN_S:g} s; default "
        f"{d['seconds']})",
    )
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
    b.set_defaults(run=run)


def _remeasure_parser(sub) -> None:
    pct = f"{TOLERANCE * 100:g} %"
    m = sub.add_parser(
        "remeasure",
        help=f"measure random points of a shipped sweep again; exit {OUTSIDE_TOLERANCE} when one "
        f"lands outside {pct} of its shipped img/s".replace("%", "%%"),  # argparse %-formats help
        description=f"Measure random ok points of a shipped sweep again and compare their img/s "
        f"with the shipped figures; a host-bound point (paced by the CPU) is decided by its GPU "
        f"busy time and launches per forward, its img/s reported over its CUDA graph measured "
        f"in the same process. Exit code: 0 when every point lands within {pct}, "
        f"{OUTSIDE_TOLERANCE} when one does not (or fails to run), 2 on a bad request.",
    )
    m.add_argument("--dataset", required=True, help="a sweep dataset, e.g. h200/sweep_fp16_nhwc")
    m.add_argument("--points", default="5", help="how many random ok points")
    m.add_argument("--seed", default="0", help="the draw's seed (reproducible)")
    m.add_argument("--device", default=None, help="override the points' device (cpu: dry run)")
    m.add_argument(
        "--out",
        default=None,
        help="parquet file for the re-measured rows (a rerun measures only what it lacks; "
        "yolo-sm check reads it as a candidate)",
    )
    m.set_defaults(run=run)


def sweep(args) -> int:
    data = load_yaml(args.config) if args.config else {}
    if args.config:
        out = data.pop("out", None)
        check_params("sweep", data, f"config file {args.config}")
        out = values.text(out, f"config file {args.config} out") if out is not None else None
    else:
        out = None
    flags = {k: getattr(args, k) for k in SWEEP_KEYS if getattr(args, k, None) is not None}
    check_params("sweep", flags, "sweep", flags=True)
    data.update(flags)
    out = args.out or out
    if not out:
        raise UserError("sweep needs --out FILE.parquet (or 'out:' in the config)")
    from yolo_sm.core.sweep import (  # torch: now
        SweepSpec,
        all_failed,
        check_environment,
        run_sweep,
    )

    spec = SweepSpec.from_mapping(data)
    # every check that can fail comes before the skip notices: an error is the only stderr line
    device(spec.device)
    check_environment(spec)
    out = output(out)
    if not spec.points():
        raise UserError("no point of the grid can run: " + "; ".join(spec.unsupported()))
    for line in spec.unsupported():
        log.warning(f"skipping {line}")
    log.info(f"sweep: {len(spec.points())} points into {out} (a rerun resumes it)")
    df = run_sweep(spec, out, progress=progress(args))
    _print_sweep_summary(df)
    failed = all_failed(df)
    if failed:
        raise UserError(failed)
    return 0


def _print_sweep_summary(df) -> None:
    import pandas as pd

    if df.empty:
        print("no points")
        return
    cols = (
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
    with pd.option_context(
        "display.width", 200, "display.max_rows", 1000, "display.float_format", "{:.4g}".format
    ):
        print(df[[c for c in cols if c in df]].to_string(index=False))
    print(worth(df))


def worth(df, what: str = "points") -> str:
    """What the rows of a sweep or bench are worth: how many were timed, how many of those are
    noisy (IQR above :data:`~yolo_sm.core.timing.NOISE_THRESHOLD` of the median) or
    host-bound (``host_bound``: the GPU idles between kernels), and the other statuses."""
    from yolo_sm.core.timing import NOISE_THRESHOLD

    ok = df[df["status"] == "ok"]

    def flagged(col):
        return ok[col].fillna(False).astype(bool) if col in ok else ok["status"].ne("ok")

    noisy, host = flagged("noisy"), flagged("host_bound")
    others = df.loc[df["status"] != "ok", "status"].value_counts().to_dict()
    return (
        f"{what}: {len(ok)} timed, of which {int((~noisy & ~host).sum())} steady, "
        f"{int(noisy.sum())} noisy (IQR above {NOISE_THRESHOLD:.0%} of the median) and "
        f"{int(host.sum())} host-bound (the GPU waits on the host)"
        + "".join(f"; {v} {k}" for k, v in others.items())
    )


def bench(args) -> int:
    from yolo_sm.core.bench import BenchSpec, run_bench
    from yolo_sm.core.models.spec import parse_models

    parse_models(values.text(args.models, "--models"), need_shape=False)  # one sentence if bad

    def given(value, parse):  # a flag left out: BenchSpec's default (BENCH_DEFAULTS)
        return None if value is None else parse(value)

    streams = lambda v: values.wholes(v, "--streams", lo=1, hi=64)  # noqa: E731
    seconds = lambda v: values.number(v, "--seconds", above=0, hi=MAX_RUN_S, unit="s")  # noqa: E731
    flags = {
        "models": args.models,
        "batches": given(args.batches, common.batches),
        "engines": given(args.engines, lambda v: values.texts(v, "--engines")),
        "pipeline_engine": given(
            args.pipeline_engine, lambda v: values.text(v, "--pipeline-engine")
        ),
        "pipeline_streams": given(args.streams, streams),
        "pipeline_modes": given(
            args.pipeline, lambda v: values.texts(v, "--pipeline", PIPELINE_MODES)
        ),
        "pipeline_nms_topk": values.whole(args.nms_topk, "--nms-topk", lo=1, hi=1 << 20),
        "device": values.device_name(args.device),
        "seconds": given(args.seconds, seconds),
        "predict": args.predict,
    }
    spec = BenchSpec.from_mapping(flags)
    device(spec.device)
    backends_available(e[0] for e in (*spec.engines, spec.pipeline_engine_here()))
    out = output(args.out)
    log.info(f"bench: {len(spec.units())} (model, batch) units into {out} (a rerun resumes it)")
    df = run_bench(spec, out, progress=progress(args))
    print_ranking(df)
    print(worth(df, "rows"))
    return 0


def print_ranking(df) -> None:
    """A bench table as its ranking (:func:`yolo_sm.topics.deploy.recommend.ranking`), the rows
    that did not run, and one line per (model, batch) saying what to deploy."""
    import pandas as pd

    cols = ["model", "batch", "rank", "scope", "variant", "img_per_s", "vs_fastest_engine"]
    cols += ["median_ms", "p99_ms", "build_s"]
    rank = ranking(df)
    with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
        print(rank[[c for c in cols if c in rank]].to_string(index=False) if len(rank) else "")
    bad = df[df["status"] != "ok"]
    for _, r in bad.iterrows():
        print(f"not run: {r['variant']} at batch {r['batch']} ({r['status']}): {r['message']}")
    for _, r in deploy(df).iterrows():
        print(deploy_line(r))


def remeasure(args) -> int:
    from yolo_sm.topics.compare import collect as again

    points = values.whole(args.points, "--points", lo=1, hi=100_000)
    seed = values.whole(args.seed, "--seed", lo=0, hi=2**32 - 1)
    out = output(args.out) if args.out is not None else None
    if args.device is not None:
        device(args.device)
    else:  # the points run on the devices they were measured on: those must exist here
        table = datasets.load(args.dataset)
        ok = table[table.status == "ok"] if "status" in table else table
        for name in sorted(set(ok["device"].astype(str))) if "device" in ok else ():
            try:
                device(name)
            except NotAvailableError:
                raise NotAvailableError(
                    f"the points of {args.dataset} were measured on {name}, which this machine "
                    "lacks; add --device cpu for a dry run"
                ) from None
    df = again.remeasure(
        args.dataset, n=points, seed=seed, device=args.device, out=out, progress=progress(args)
    )
    within = next(c for c in df.columns if c.startswith("within"))
    cols = ["width", "precision", "layout", "backend", "batch", "shipped_img_per_s"]
    cols += ["new_img_per_s", "ratio", "host_bound", "same_process_ratio", "rule_ratio", within]
    cols += ["status"]
    print(df[[c for c in cols if c in df]].round(3).to_string(index=False))
    print(again.summary(df))
    return 0 if bool(df[within].all()) else OUTSIDE_TOLERANCE

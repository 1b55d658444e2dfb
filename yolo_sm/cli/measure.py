"""``yolo-sm sweep`` (a grid of timed points), ``yolo-sm bench`` (engines side by side) and
``yolo-sm remeasure`` (random points of a shipped sweep measured again: a gate)."""

from __future__ import annotations

from yolo_sm.analyse.hostbound import TOLERANCE
from yolo_sm.cli.common import device, log, model_spec_flags, print_table
from yolo_sm.contract import datasets, values
from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.plans import load_yaml
from yolo_sm.contract.steps import MODEL_HELP, BenchStep, SweepStep
from yolo_sm.topics.deploy.recommend import deploy, deploy_line, ranking

#: exit code of `yolo-sm remeasure` when a point lands outside the tolerance (2: a user error)
OUTSIDE_TOLERANCE = 1


def add_parser(sub) -> None:
    _sweep_parser(sub)
    _bench_parser(sub)
    _remeasure_parser(sub)


def _sweep_parser(sub) -> None:
    s = sub.add_parser("sweep", help="time a grid of model x engine x batch points into parquet")
    s.add_argument("--config", help="YAML file with the same keys as the flags (flags override it)")
    SweepStep.add_options(s, set(SweepStep.params()) - {"model", "models", "input_shape", "check"})
    model_spec_flags(s)
    check = SweepStep.params()["check"].metadata["help"]
    s.add_argument("--check", choices=("on", "off"), help=check)
    s.add_argument("--no-check", dest="check", action="store_const", const="off", help="off")
    s.add_argument("--out", required=False, help="parquet file; rerunning resumes it")
    s.set_defaults(run=sweep)


def _bench_parser(sub) -> None:
    b = sub.add_parser(
        "bench",
        help="rank the paths you would deploy: model-only engines, the frames-to-boxes "
        "pipeline, ultralytics predict",
        description="Measure, side by side in one process per (model, batch), the eager fp16 "
        "NHWC baseline, the model-only engines, the frames-to-boxes pipeline (uint8 frames in "
        "pinned memory to boxes on the host) and ultralytics' YOLO.predict; print them ranked "
        "per batch and which path to deploy in each. A rerun skips what --out holds.",
    )
    b.add_argument("--models", "--model", default="yolov8:0.5", help=MODEL_HELP)
    BenchStep.add_options(b, BENCH_FLAGS)
    b.add_argument(
        "--no-predict", dest="predict", action="store_false", help="skip YOLO.predict rows"
    )
    b.add_argument(
        "--out",
        required=True,
        help="parquet file (a rerun skips the (model, batch) pairs it holds)",
    )
    b.set_defaults(run=bench)  # fmt: skip


#: the bench settings ``yolo-sm bench`` takes as flags
BENCH_FLAGS = (
    "batches", "engines", "pipeline_engine", "pipeline_streams", "pipeline_modes",
    "pipeline_nms_topk", "device", "seconds",
)  # fmt: skip


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
    m.set_defaults(run=remeasure)


def sweep(args) -> int:
    data = load_yaml(args.config) if args.config else {}
    out = data.pop("out", None)
    if args.config:
        SweepStep.from_mapping(data, f"config file {args.config}")
        out = values.text(out, f"config file {args.config} out") if out is not None else None
    flags = {k: getattr(args, k, None) for k in SweepStep.params()}
    flags = {k: x for k, x in flags.items() if x is not None}
    SweepStep.from_mapping(flags, "sweep", flags=True)
    data.update(flags)
    out = args.out or out
    if not out:
        raise UserError("sweep needs --out FILE.parquet (or 'out:' in the config)")
    from yolo_sm.core.sweep import SweepSpec, all_failed, check_environment, run_sweep  # torch

    spec = SweepSpec.from_mapping(data)
    check_environment(spec)  # before the skip notices: an error is the only stderr line
    out = values.output_path(out)
    if not spec.points():
        raise UserError("no point of the grid can run: " + "; ".join(spec.unsupported()))
    for line in spec.unsupported():
        log.warning(f"skipping {line}")
    log.info(f"sweep: {len(spec.points())} points into {out} (a rerun resumes it)")
    df = run_sweep(spec, out, progress=not args.quiet)
    _print_sweep_summary(df)
    failed = all_failed(df)
    if failed:
        raise UserError(failed)
    return 0


def _print_sweep_summary(df) -> None:
    if df.empty:
        print("no points")
        return
    cols = ("family", "scale", "width", "precision", "layout", "backend", "batch", "imgsz",
            "status", "median_ms", "iqr_ms", "img_per_s", "tflops", "rel_err")  # fmt: skip
    print_table(df[[c for c in cols if c in df]])
    print(worth(df))


def worth(df, what: str = "points") -> str:
    """How many rows were timed, of them how many noisy or host-bound, and the other statuses."""
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
    from yolo_sm.core.environment import check_backends

    flags = {k: getattr(args, k) for k in BENCH_FLAGS}
    spec = BenchSpec.from_mapping(
        {**flags, "models": args.models, "predict": args.predict}, "bench", flags=True
    )
    device(spec.device)
    check_backends(e[0] for e in (*spec.engines, spec.pipeline_engine_here()))
    out = values.output_path(args.out)
    log.info(f"bench: {len(spec.units())} (model, batch) units into {out} (a rerun resumes it)")
    df = run_bench(spec, out, progress=not args.quiet)
    print_ranking(df)
    print(worth(df, "rows"))
    return 0


def print_ranking(df) -> None:
    """A bench table ranked per batch, the rows that did not run, what to deploy per batch."""
    rank = ranking(df)
    cols = ["batch", "rank", "scope", "variant", "vs_fastest_engine", "img_per_s", "median_ms"]
    if len(rank):
        print_table(rank[[*cols, "p99_ms", "build_s"]])
    else:
        print("")
    for _, r in df[df["status"] != "ok"].iterrows():
        print(f"not run: {r['variant']} at batch {r['batch']} ({r['status']}): {r['message']}")
    for _, r in deploy(rank).iterrows():
        print(deploy_line(r))


def remeasure(args) -> int:
    from yolo_sm.topics.compare import collect as again

    points = values.whole(args.points, "--points", lo=1, hi=100_000)
    seed = values.whole(args.seed, "--seed", lo=0, hi=2**32 - 1)
    out = values.output_path(args.out) if args.out is not None else None
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
        args.dataset, n=points, seed=seed, device=args.device, out=out, progress=not args.quiet
    )
    within = next(c for c in df.columns if c.startswith("within"))
    cols = ["width", "precision", "layout", "backend", "batch", "shipped_img_per_s"]
    cols += ["new_img_per_s", "ratio", "host_bound", "same_process_ratio", "rule_ratio", within]
    cols += ["status"]
    print(df[[c for c in cols if c in df]].round(3).to_string(index=False))
    print(again.summary(df))
    return 0 if bool(df[within].all()) else OUTSIDE_TOLERANCE

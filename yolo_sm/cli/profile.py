"""``yolo-sm trace`` (PyTorch profiler), ``ncu`` (Nsight Compute), ``gpm`` (NVML GPM),
``profile`` (the three joined per layer) and ``occupancy`` (a launch's theoretical occupancy)."""

from __future__ import annotations

from yolo_sm.analyse import occupancy as occ
from yolo_sm.analyse.gpm import overhead_pct, run_medians
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.cli.common import byte_count, dispatch, model_flags, widths
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.store import check_output_path, write_atomic


def add_parser(sub) -> None:
    t = sub.add_parser("trace", help="PyTorch profiler trace of one model/engine config")
    model_flags(t)
    t.add_argument("--backend", default="eager", help="eager, cudagraph or compile")
    t.add_argument("--precision", default="fp16")
    t.add_argument("--layout", default="nhwc")
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--iters", type=int, default=3, help="profiled forwards")
    t.add_argument("--out", required=True, help="trace file (.json.gz); provenance goes beside it")
    t.set_defaults(run=run)

    n = sub.add_parser("ncu", help="Nsight Compute per-kernel table of NVTX-scoped forwards")
    model_flags(n, many=True)
    n.add_argument("--precisions", default="fp16")
    n.add_argument("--layouts", default="nhwc")
    n.add_argument("--batches", default="8")
    n.add_argument("--metric-set", default="occupancy", help="occupancy, throughput or full")
    n.add_argument("--timeout", type=float, default=600, help="seconds before ncu is stopped")
    n.add_argument("--out", required=True, help="CSV file (ncu --csv --page raw)")
    n.set_defaults(run=run)

    g = sub.add_parser("gpm", help="NVML GPM timeline of one config running for some seconds")
    model_flags(g, many=True)
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
    g.set_defaults(run=run)

    a = sub.add_parser(
        "profile", help="Kineto + Nsight Compute + GPM on each width, joined per layer"
    )
    model_flags(a, many=True)
    a.set_defaults(widths="0.5,1.5")
    a.add_argument("--precision", default="fp16")
    a.add_argument("--layout", default="nhwc")
    a.add_argument("--batch", type=int, default=8)
    a.add_argument("--metric-set", default="occupancy", help="ncu set: occupancy/throughput/full")
    a.add_argument("--gpm-seconds", type=float, default=3.0)
    a.add_argument("--out", required=True, help="folder for the tables, traces and summary.json")
    a.set_defaults(run=run)

    o = sub.add_parser("occupancy", help="theoretical occupancy of a launch (what-if calculator)")
    o.add_argument("--cc", default="9.0", help="compute capability, e.g. 9.0 (Hopper), 8.0")
    o.add_argument("--threads", type=int, required=True, help="threads per block")
    o.add_argument("--registers", type=int, default=32, help="registers per thread")
    o.add_argument(
        "--smem",
        default="0",
        help="shared memory per block (static + dynamic): bytes, or with a K suffix for KiB",
    )
    o.add_argument("--grid", type=int, default=None, help="blocks in the grid (prints waves)")
    o.add_argument("--sm-count", type=int, default=132, help="SMs for the wave count")
    o.add_argument(
        "--vary",
        choices=("threads_per_block", "registers_per_thread", "shared_mem_per_block"),
        help="print the what-if curve",
    )
    o.set_defaults(run=run)


def run(args) -> int:
    commands = {"trace": trace, "ncu": ncu, "gpm": gpm, "profile": profile, "occupancy": occupancy}
    return dispatch(commands, args)


def occupancy(args) -> int:
    smem = byte_count(args.smem)
    try:
        res = occ.theoretical_occupancy(args.cc, args.threads, args.registers, smem)
    except ValueError as e:
        raise UserError(str(e)) from None
    for k, v in res.as_dict().items():
        print(f"{k:<32} {v}")
    if args.grid:
        per_sm, sms = res.active_blocks_per_sm, args.sm_count
        w = occ.waves(args.grid, per_sm, sms)
        tail = occ.tail_fraction(args.grid, per_sm, sms)
        print(f"{'waves':<32} {w:.3f} (last wave {tail:.0%} full)")
    if args.vary:
        curve = occ.occupancy_curve(
            args.cc,
            vary=args.vary,
            threads_per_block=args.threads,
            registers_per_thread=args.registers,
            shared_mem_per_block=smem,
        )
        print(curve.to_string(index=False))
    return 0


def trace(args) -> int:
    from dataclasses import replace

    from yolo_sm.collect.engines import EngineConfig, build_engine, check_device
    from yolo_sm.collect.models import build_yolo, parse_models
    from yolo_sm.collect.profiling import kineto
    from yolo_sm.collect.profiling.target import model_of

    check_device(args.device)
    if not str(args.out).endswith(".json.gz"):
        raise UserError(f"--out must end in .json.gz, got {args.out}")
    cfg = EngineConfig(
        backend=args.backend,
        precision=args.precision,
        layout=args.layout,
        batch=args.batch,
        imgsz=args.imgsz,
        device=args.device,
    )
    if args.models:
        specs = parse_models(args.models, args.input_shape, need_shape=False)
        if len(specs) != 1:
            raise UserError("yolo-sm trace profiles one model: give one --model")
        model = model_of(args.family, specs[0], args.imgsz)
        cfg = replace(cfg, imgsz=specs[0].imgsz or args.imgsz)
    else:
        model = build_yolo(args.family, args.width)
    eng = build_engine(model, cfg)
    x = eng._input if eng._input is not None else eng.make_input(0)  # a graph's own input
    # layer hooks fire in eager forwards only (a graph replays, a compiled graph is fused)
    hooked = eng.module if args.backend == "eager" else None
    path = kineto.capture(
        lambda: eng(x), args.out, model=hooked, iters=args.iters, device=args.device
    )
    df = kineto.load_kernels(path)
    print(f"wrote {path} ({len(df)} kernels in {args.iters} forwards)")
    if not df.empty:
        cols = ("theoretical_occupancy_pct", "est_occupancy_pct")
        print(time_weighted(df, ["stage"], cols).round(1).to_string(index=False))
    return 0


def ncu(args) -> int:
    from yolo_sm.collect.engines import check_device
    from yolo_sm.collect.profiling import ncu as nsight
    from yolo_sm.collect.profiling.target import target_argv

    check_device(args.device)
    target = target_argv(
        args.family,
        args.widths,
        args.precisions,
        args.layouts,
        args.batches,
        args.imgsz,
        args.device,
        models=args.models,
        input_shape=args.input_shape,
    )
    df = nsight.profile(target, args.out, metric_set=args.metric_set, timeout_s=args.timeout)
    print(f"wrote {args.out} ({len(df)} kernels)")
    cols = [c for c in ("theoretical_occupancy_pct", "achieved_occupancy_pct") if c in df]
    if cols and "duration_us" in df:
        print(time_weighted(df, ["config", "stage"], cols).round(1).to_string(index=False))
    return 0


def gpm(args) -> int:
    from yolo_sm.collect.engines import check_device
    from yolo_sm.collect.models import parse_models
    from yolo_sm.collect.profiling.suite import engines, gpm_overhead, run_gpm
    from yolo_sm.collect.provenance import collect

    check_device(args.device)
    if not args.device.startswith("cuda"):
        raise UserError("yolo-sm gpm samples a GPU: use --device cuda")
    out = check_output_path(args.out)
    keys = parse_models(args.models, args.input_shape, False) if args.models else None
    grid = [(w, args.precision, args.layout, args.batch) for w in keys or widths(args.widths)]
    built = list(engines(args.family, grid, args.imgsz, args.device))
    df, info = run_gpm(built, seconds=args.seconds, hz=args.hz)
    write_atomic(df, out, {"provenance": collect(args.device), "sampler": info})
    print(f"wrote {out} ({info['mode']}, {info['polls']} polls, {info['stale_polls']} stale)")
    print(run_medians(df).drop(columns="windows").set_index("config").round(1).to_string())
    if args.overhead_rounds > 0:
        import pandas as pd

        ov = pd.concat(
            [gpm_overhead(e, x, label, args.overhead_rounds, hz=args.hz) for label, e, x in built],
            ignore_index=True,
        )
        ov_path = out.with_name(out.stem + "_overhead.parquet")
        write_atomic(ov, ov_path, {"provenance": collect(args.device)})
        for label, g in ov.groupby("config"):
            print(
                f"{label}: {g[~g.sampler].img_per_s.median():.0f} img/s without the sampler, "
                f"overhead {overhead_pct(g):+.2f} % (median of {args.overhead_rounds} pairs)"
            )
    for _, e, _ in built:
        e.close()
    return 0


def profile(args) -> int:
    from yolo_sm.collect.engines import check_device
    from yolo_sm.collect.profiling.suite import profile_all

    check_device(args.device)
    s = profile_all(
        args.out,
        family=args.family,
        widths=widths(args.widths),
        precision=args.precision,
        layout=args.layout,
        batch=args.batch,
        imgsz=args.imgsz,
        device=args.device,
        metric_set=args.metric_set,
        gpm_seconds=args.gpm_seconds,
        models=args.models,
        input_shape=args.input_shape,
    )
    print(f"wrote {args.out}: kineto/ncu/gpm/layers parquet, traces, summary.json")
    print(f"unattributed kernels: {s['unattributed_kernels']}")
    print(f"ncu: {s['ncu_wall_s']:.0f} s in all, {s['ncu_s_per_forward']:.0f} s per forward")
    print(f"GPM overhead on throughput: {s['gpm_overhead_pct']:+.2f} %")
    for cfg, c in s["configs"].items():
        print(
            f"{cfg}: ncu {c['ncu_time_ms_per_forward']:.2f} ms/forward, theoretical "
            f"{c['theoretical_occupancy_tw_pct']:.1f} %, achieved "
            f"{c['achieved_occupancy_tw_pct']:.1f} %, Kineto est. "
            f"{c['kineto_est_occupancy_tw_pct']:.1f} %, slowest "
            f"{c['slowest_layer']} ({c['slowest_layer_share']:.0%}), GPM SM occupancy "
            f"{c.get('gpm_sm_occupancy_pct', float('nan')):.1f} %"
        )
    return 0

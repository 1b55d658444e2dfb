"""``yolo-sm trace`` (PyTorch profiler), ``ncu`` (Nsight Compute), ``gpm`` (NVML GPM),
``profile`` (the three joined per layer) and ``occupancy`` (a launch's theoretical occupancy)."""

from __future__ import annotations

from yolo_sm.analyse import occupancy as occ
from yolo_sm.analyse.gpm import overhead_pct, run_medians
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.cli.common import byte_count, device, model_flags
from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import MAX_ITERS, GpmStep, NcuStep, TraceStep
from yolo_sm.contract.store import write_atomic
from yolo_sm.contract.values import MAX_RUN_S

#: the backends a trace can profile
TRACE_BACKENDS = ("eager", "cudagraph", "compile")


def add_parser(sub) -> None:
    t = sub.add_parser("trace", help="PyTorch profiler trace of one model/engine config")
    model_flags(t)
    t.add_argument("--backend", default="eager", help=", ".join(TRACE_BACKENDS))
    t.add_argument("--precision", default="fp16")
    t.add_argument("--layout", default="nhwc")
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--iters", type=int, default=3, help=f"profiled forwards (1-{MAX_ITERS})")
    t.add_argument("--out", required=True, help="trace file (.json.gz); provenance goes beside it")
    t.set_defaults(run=trace)

    n = sub.add_parser("ncu", help="Nsight Compute per-kernel table of NVTX-scoped forwards")
    model_flags(n, many=True)
    n.add_argument("--precisions", default="fp16")
    n.add_argument("--layouts", default="nhwc")
    n.add_argument("--batches", default="8")
    n.add_argument("--metric-set", default="occupancy", help="occupancy, throughput, full, stalls")
    n.add_argument("--timeout", dest="timeout_s", type=float, default=600, help="ncu's limit (s)")
    n.add_argument("--out", required=True, help="CSV file (ncu --csv --page raw)")
    n.set_defaults(run=ncu)

    g = sub.add_parser("gpm", help="NVML GPM timeline of one config running for some seconds")
    model_flags(g, many=True)
    g.add_argument("--precision", default="fp16")
    g.add_argument("--layout", default="nhwc")
    g.add_argument("--batch", type=int, default=16)
    g.add_argument("--seconds", type=float, default=3.0, help=f"per width (at most {MAX_RUN_S:g})")
    g.add_argument("--hz", type=float, default=20.0, help="polling rate (GPM refreshes ~10 Hz)")
    rounds = "then measure the sampler's cost on throughput: N paired rounds per width"
    g.add_argument("--overhead-rounds", type=int, default=0, help=rounds)
    g.add_argument("--out", required=True, help="parquet file (tidy: one row per window x metric)")
    g.set_defaults(run=gpm)

    a = sub.add_parser("profile", help="Kineto + Nsight Compute + GPM per width, joined per layer")
    model_flags(a, many=True)
    a.set_defaults(widths="0.5,1.5")
    a.add_argument("--precision", default="fp16")
    a.add_argument("--layout", default="nhwc")
    a.add_argument("--batch", type=int, default=8)
    a.add_argument("--metric-set", default="occupancy", help="ncu set: occupancy/throughput/full")
    a.add_argument("--gpm-seconds", type=float, default=3.0)
    a.add_argument("--out", required=True, help="folder for the tables, traces and summary.json")
    a.set_defaults(run=profile)

    o = sub.add_parser("occupancy", help="theoretical occupancy of a launch (what-if calculator)")
    o.add_argument("--cc", default="9.0", help="compute capability, e.g. 9.0 (Hopper), 8.0")
    o.add_argument("--threads", type=int, required=True, help="threads per block")
    o.add_argument("--registers", type=int, default=32, help="registers per thread")
    o.add_argument("--smem", default="0", help="shared memory per block: bytes, or K for KiB")
    o.add_argument("--grid", type=int, default=None, help="blocks in the grid (prints waves)")
    o.add_argument("--sm-count", type=int, default=132, help="SMs for the wave count (H200: 132)")
    vary = ("threads_per_block", "registers_per_thread", "shared_mem_per_block")
    o.add_argument("--vary", choices=vary, help="print the what-if curve")
    o.set_defaults(run=occupancy)


#: grid fields some commands take as one value
SINGULAR = {"widths": "width", "precisions": "precision", "layouts": "layout", "batches": "batch"}


def _spec(cls, args):
    """``cls`` of the flags named as its fields (or their :data:`SINGULAR`), checked as a plan
    step's params are (before the device: any machine names a bad value)."""
    got = {k: getattr(args, k, getattr(args, SINGULAR.get(k, "-"), None)) for k in cls.params()}
    return cls.from_mapping({k: x for k, x in got.items() if x is not None}, flags=True)


def occupancy(args) -> int:
    smem = byte_count(args.smem)
    res = occ.theoretical_occupancy(args.cc, args.threads, args.registers, smem)
    if args.grid is not None:
        values.whole(args.grid, "--grid", lo=1)
    values.whole(args.sm_count, "--sm-count", lo=1, hi=100_000, unit="SMs")
    if res.active_blocks_per_sm == 0 and (args.grid is not None or not args.vary):
        raise UserError(
            f"this launch fits no block on an SM of CC {res.compute_capability}: "
            f"{res.limiter} allow 0 blocks ({res.registers_per_block_allocated} registers per "
            f"block); use fewer threads per block or registers per thread"
        )
    for k, v in res.as_dict().items():
        print(f"{k:<32} {v}")
    if args.grid is not None:
        per_sm, sms = res.active_blocks_per_sm, args.sm_count
        w = occ.waves(args.grid, per_sm, sms)
        tail = occ.tail_fraction(args.grid, per_sm, sms)
        print(f"{'waves':<32} {w:.3f} (last wave {tail:.0%} full)")
    if args.vary:
        launch = {"threads_per_block": args.threads, "registers_per_thread": args.registers}
        curve = occ.occupancy_curve(args.cc, vary=args.vary, shared_mem_per_block=smem, **launch)
        print(curve.to_string(index=False))
    return 0


def trace(args) -> int:
    from dataclasses import replace

    from yolo_sm.core.engines import EngineConfig, build_engine
    from yolo_sm.core.models import build_yolo, parse_models
    from yolo_sm.core.profiling import kineto
    from yolo_sm.core.profiling.target import model_of

    backend = values.text(args.backend, "--backend", TRACE_BACKENDS)
    spec = _spec(TraceStep, args)
    iters, size, width = spec.iters, spec.imgsz, values.multiplier(args.width, "--width")
    dev = device(args.device)
    if not str(args.out).endswith(".json.gz"):
        raise UserError(f"--out must end in .json.gz, got {args.out}")
    out = values.output_path(args.out)
    values.output_path(f"{out}.metadata.json", "--out's metadata file")
    cfg = EngineConfig(backend, args.precision, args.layout, args.batch, size, device=dev)
    if args.models:
        specs = parse_models(args.models, args.input_shape, need_shape=False)
        if len(specs) != 1:
            raise UserError("yolo-sm trace profiles one model: give one --model")
        model = model_of(args.family, specs[0], size)
        cfg = replace(cfg, imgsz=specs[0].imgsz or size)
    else:
        model = build_yolo(args.family, width)
    eng = build_engine(model, cfg)
    x = eng._input if eng._input is not None else eng.make_input(0)  # a graph's own input
    # layer hooks fire in eager forwards only (a graph replays, a compiled graph is fused)
    hooked = eng.module if backend == "eager" else None
    path = kineto.capture(lambda: eng(x), out, model=hooked, iters=iters, device=dev)
    df = kineto.load_kernels(path)
    print(f"wrote {path} ({len(df)} kernels in {iters} forwards)")
    if not df.empty:
        cols = ("theoretical_occupancy_pct", "est_occupancy_pct")
        print(time_weighted(df, ["stage"], cols).round(1).to_string(index=False))
    return 0


def ncu(args) -> int:
    from yolo_sm.core.profiling import ncu as nsight
    from yolo_sm.core.profiling.target import target_argv

    spec = _spec(NcuStep, args)
    device(args.device, gpu_only="yolo-sm ncu (Nsight Compute)")
    out = values.output_path(args.out)
    target = target_argv(
        spec.family,
        ",".join(f"{w:g}" for w in spec.widths),
        ",".join(spec.precisions),
        ",".join(spec.layouts),
        ",".join(map(str, spec.batches)),
        spec.imgsz,
        args.device,
        models=args.models,
        input_shape=args.input_shape,
    )
    df = nsight.profile(target, out, metric_set=spec.metric_set, timeout_s=spec.timeout_s)
    print(f"wrote {out} ({len(df)} kernels)")
    cols = [c for c in ("theoretical_occupancy_pct", "achieved_occupancy_pct") if c in df]
    if cols and "duration_us" in df:
        print(time_weighted(df, ["config", "stage"], cols).round(1).to_string(index=False))
    return 0


def gpm(args) -> int:
    from yolo_sm.core.models import parse_models
    from yolo_sm.core.profiling.suite import engines, gpm_overhead, run_gpm
    from yolo_sm.core.provenance import collect

    spec = _spec(GpmStep, args)
    seconds, hz = spec.seconds, spec.hz
    rounds = values.whole(args.overhead_rounds, "--overhead-rounds", lo=0, hi=1000)
    device(args.device, gpu_only="yolo-sm gpm (it samples the GPU's counters)")
    out = values.output_path(args.out)
    ov_path = out.with_name(out.stem + "_overhead.parquet")
    if rounds:
        values.output_path(ov_path, "the overhead table")
    keys = parse_models(args.models, args.input_shape, False) if args.models else None
    grid = [(w, args.precision, args.layout, args.batch) for w in keys or spec.widths]
    built = list(engines(spec.family, grid, spec.imgsz, args.device))
    df, info = run_gpm(built, seconds=seconds, hz=hz)
    write_atomic(df, out, {"provenance": collect(args.device), "sampler": info})
    print(f"wrote {out} ({info['mode']}, {info['polls']} polls, {info['stale_polls']} stale)")
    print(run_medians(df).drop(columns="windows").set_index("config").round(1).to_string())
    if rounds > 0:
        import pandas as pd

        ov = pd.concat(
            [gpm_overhead(e, x, label, rounds, hz=hz) for label, e, x in built],
            ignore_index=True,
        )
        write_atomic(ov, ov_path, {"provenance": collect(args.device)})
        for label, g in ov.groupby("config"):
            print(
                f"{label}: {g[~g.sampler].img_per_s.median():.0f} img/s without the sampler, "
                f"overhead {overhead_pct(g):+.2f} % (median of {rounds} pairs)"
            )
    for _, e, _ in built:
        e.close()
    return 0


def profile(args) -> int:
    from yolo_sm.core.profiling.suite import profile_all

    spec = _spec(NcuStep, args)
    gpm_seconds = values.run_s(args.gpm_seconds, "--gpm-seconds")  # the GPM step's own bound
    device(args.device, gpu_only="yolo-sm profile (Nsight Compute and GPM)")
    out = values.output_path(args.out, folder=True)
    s = profile_all(
        out,
        family=spec.family,
        widths=spec.widths,
        precision=args.precision,
        layout=args.layout,
        batch=args.batch,
        imgsz=spec.imgsz,
        device=args.device,
        metric_set=spec.metric_set,
        gpm_seconds=gpm_seconds,
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

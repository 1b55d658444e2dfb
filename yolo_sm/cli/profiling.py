"""``yolo-sm`` sub-commands for the profilers, collection plans and the benchmark (the parser
and the core commands live in :mod:`yolo_sm.cli`)."""

from __future__ import annotations

from yolo_sm.contract.errors import UserError


def _bytes(text: str) -> int:
    t = str(text).strip().lower()
    scale = 1024 if t.endswith("k") else 1
    try:
        value = float(t.rstrip("k").rstrip("i").rstrip("b")) if scale == 1 else float(t[:-1])
    except ValueError:
        raise UserError(f"--smem must be a byte count such as 49152 or 48K, got {text!r}") from None
    return int(value * scale)


def cmd_occupancy(args) -> int:
    from yolo_sm.analyse import occupancy

    smem = _bytes(args.smem)
    try:
        res = occupancy.theoretical_occupancy(args.cc, args.threads, args.registers, smem)
    except ValueError as e:
        raise UserError(str(e)) from None
    for k, v in res.as_dict().items():
        print(f"{k:<32} {v}")
    if args.grid:
        per_sm, sms = res.active_blocks_per_sm, args.sm_count
        w = occupancy.waves(args.grid, per_sm, sms)
        tail = occupancy.tail_fraction(args.grid, per_sm, sms)
        print(f"{'waves':<32} {w:.3f} (last wave {tail:.0%} full)")
    if args.vary:
        curve = occupancy.occupancy_curve(
            args.cc,
            vary=args.vary,
            threads_per_block=args.threads,
            registers_per_thread=args.registers,
            shared_mem_per_block=smem,
        )
        print(curve.to_string(index=False))
    return 0


def cmd_collect(args) -> int:
    from yolo_sm.collect import plans as collect

    plan = collect.load_plan(args.plan)
    if args.status:
        table = collect.status(plan, args.out)
        print(table.to_string(index=False))
        left = float(table.est_left_s.sum())
        if left:
            print(
                f"left: about {left / 60:.1f} min of GPU time by these estimates "
                f"({sum(table.state != 'done')} step(s) not done)"
            )
        return 0
    only = [x for x in (args.only or "").split(",") if x]
    table = collect.run_plan(
        plan,
        args.out,
        only=only,
        max_minutes=args.max_minutes,
        progress=not args.quiet,
        redo=args.redo_errors,
    )
    print(table.to_string(index=False))
    return 0


def cmd_bench(args) -> int:
    import pandas as pd

    from yolo_sm.collect.bench import BenchSpec, run_bench
    from yolo_sm.collect.engines import check_device
    from yolo_sm.contract.store import check_output_path

    spec = BenchSpec.from_mapping(
        {
            "models": args.models,
            "batches": args.batches,
            "engines": args.engines,
            "pipeline_streams": args.streams,
            "device": args.device,
            "seconds": args.seconds,
            "predict": args.predict,
        }
    )
    check_device(spec.device)
    out = check_output_path(args.out)
    df = run_bench(spec, out)
    cols = [
        "family",
        "width",
        "batch",
        "variant",
        "scope",
        "status",
        "median_ms",
        "p99_ms",
        "img_per_s",
        "vs_baseline",
        "rel_err",
    ]
    with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
        print(df[[c for c in cols if c in df]].to_string(index=False))
    return 0


def cmd_trace(args) -> int:
    from yolo_sm.analyse.weighting import time_weighted
    from yolo_sm.collect.engines import EngineConfig, build_engine, check_device
    from yolo_sm.collect.models import build_yolo
    from yolo_sm.collect.profiling import kineto

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
    model = build_yolo(args.family, args.width)
    eng = build_engine(model, cfg)
    x = eng._input if eng._input is not None else eng.make_input(0)
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


def cmd_ncu(args) -> int:
    from yolo_sm.analyse.weighting import time_weighted
    from yolo_sm.collect.engines import check_device
    from yolo_sm.collect.profiling import ncu
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
    )
    df = ncu.profile(target, args.out, metric_set=args.metric_set, timeout_s=args.timeout)
    print(f"wrote {args.out} ({len(df)} kernels)")
    cols = [c for c in ("theoretical_occupancy_pct", "achieved_occupancy_pct") if c in df]
    if cols and "duration_us" in df:
        print(time_weighted(df, ["config", "stage"], cols).round(1).to_string(index=False))
    return 0


def _widths(text: str) -> list[float]:
    try:
        widths = [float(w) for w in str(text).split(",") if w.strip()]
    except ValueError:
        raise UserError(f"--widths takes numbers such as 0.5,1.5, got {text!r}") from None
    if not widths or any(w <= 0 for w in widths):
        raise UserError(f"--widths must be positive numbers, got {text!r}")
    return widths


def cmd_gpm(args) -> int:
    from yolo_sm.analyse.gpm import run_medians
    from yolo_sm.collect.engines import check_device
    from yolo_sm.collect.profiling.suite import engines, run_gpm
    from yolo_sm.collect.provenance import collect
    from yolo_sm.contract.store import check_output_path, write_atomic

    check_device(args.device)
    if not args.device.startswith("cuda"):
        raise UserError("yolo-sm gpm samples a GPU: use --device cuda")
    out = check_output_path(args.out)
    widths = _widths(args.widths)
    grid = [(w, args.precision, args.layout, args.batch) for w in widths]
    built = list(engines(args.family, grid, args.imgsz, args.device))
    df, info = run_gpm(built, seconds=args.seconds, hz=args.hz)
    write_atomic(df, out, {"provenance": collect(args.device), "sampler": info})
    print(f"wrote {out} ({info['mode']}, {info['polls']} polls, {info['stale_polls']} stale)")
    print(run_medians(df).drop(columns="windows").set_index("config").round(1).to_string())
    if args.overhead_rounds > 0:
        import pandas as pd

        from yolo_sm.analyse.gpm import overhead_pct
        from yolo_sm.collect.profiling.suite import gpm_overhead

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


def cmd_profile(args) -> int:
    from yolo_sm.collect.engines import check_device
    from yolo_sm.collect.profiling.suite import profile_all

    check_device(args.device)
    s = profile_all(
        args.out,
        family=args.family,
        widths=_widths(args.widths),
        precision=args.precision,
        layout=args.layout,
        batch=args.batch,
        imgsz=args.imgsz,
        device=args.device,
        metric_set=args.metric_set,
        gpm_seconds=args.gpm_seconds,
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

"""The runners of a collection plan's steps (:data:`RUNNERS`, one per step kind) and what
they share with the plan's status: each kind's spec built from a step's params, where a step's
table goes, and the command its dataset records. A runner measures into ``out_dir`` and writes
its table atomically; :mod:`yolo_sm.core.plans` registers it."""

from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.manifest import register as reg
from yolo_sm.contract.plans import Plan, Step
from yolo_sm.contract.scrub import shown_path
from yolo_sm.contract.store import (
    inside,
    write_atomic,
)
from yolo_sm.contract.workload import clear as clear_workload
from yolo_sm.core import numerics
from yolo_sm.core.bench import BenchSpec, run_bench
from yolo_sm.core.devices import nvml_index
from yolo_sm.core.grid import parse_bool
from yolo_sm.core.model_tables import DEFAULT_MODELS, model_layers
from yolo_sm.core.profiling import ncu
from yolo_sm.core.profiling.suite import engines, run_gpm
from yolo_sm.core.profiling.target import build_parser, configs, target_argv
from yolo_sm.core.profiling.trace_units import TraceSpec, run_traces
from yolo_sm.core.provenance import collect
from yolo_sm.core.sweep import SweepSpec, run_sweep
from yolo_sm.topics.deploy.collect import CacheSpec, run_cache_builds
from yolo_sm.topics.deploy.collect_probe import probe_pipeline
from yolo_sm.topics.memory.collect import (
    ALLOC_CONFS,
    DEFAULT_LIFETIME_MODELS,
    lifetimes_table,
    pool_table,
)
from yolo_sm.topics.monitor.collect import Monitor
from yolo_sm.topics.monitor.collect_exporter import record_frame, serve
from yolo_sm.topics.precision.collect import Int8KernelSpec, run_int8_kernels
from yolo_sm.topics.resolutions.collect import ResolutionSpec, run_resolutions
from yolo_sm.topics.roofline.collect import measure_ceilings
from yolo_sm.topics.sharing.collect import run_sharing_step
from yolo_sm.topics.techniques.collect import techniques_table
from yolo_sm.topics.wide_deep.collect import WideDeepSpec, run_wide_vs_deep


def sweep_spec(step: Step, plan: Plan):

    return SweepSpec.from_mapping({"device": plan.device, **model_params(step, plan)})


def model_params(step: Step, plan: Plan) -> dict:
    """A step's params with its ``model`` (or the plan's) as the sweep's ``models``."""
    p = dict(step.params)
    model = p.pop("model", None) or getattr(plan, "model", "") or None
    return {**p, "models": model} if model else p


def bench_spec(step: Step, plan: Plan):

    return BenchSpec.from_mapping({"device": plan.device, **step.params})


def cache_spec(step: Step, plan: Plan) -> CacheSpec:

    return CacheSpec.from_mapping({"device": plan.device, **step.params})


def int8_kernel_spec(step: Step, plan: Plan) -> Int8KernelSpec:

    return Int8KernelSpec.from_mapping({"device": plan.device, **step.params})


def step_path(step: Step, out_dir: Path) -> Path:
    """The output file of ``step`` in ``out_dir``, checked to stay inside it (one sentence
    otherwise: a plan's ``out`` cannot write elsewhere)."""
    return inside(out_dir, step.out, f"plan step {step.name}'s out")


def registration_command(plan: Plan, out_dir: Path, step: Step) -> str:
    """The command recorded for a step's dataset, as a user would type it (paths relative to
    the working folder)."""
    return (
        f"yolo-sm collect --plan {shown_path(str(Path(plan.path or plan.name).absolute()))} "
        f"--out {shown_path(str(out_dir.absolute()))} --only {step.name}"
        + (f" --model {plan.model}" if plan.model else "")
        + plan.flags
    )


def _run_sweep(step, plan, out_dir, deadline, progress):

    run_sweep(
        sweep_spec(step, plan), step_path(step, out_dir), progress=progress, deadline=deadline
    )


def _configs(step: Step, plan: Plan):
    """(family, width, precision, layout, batch) tuples of a profiling step's grid."""

    p = step.params
    args = build_parser().parse_args(
        [
            "--family",
            str(p.get("family", "yolov8")),
            "--widths",
            _csv(p.get("widths", "1.0")),
            "--precisions",
            _csv(p.get("precisions", "fp16")),
            "--layouts",
            _csv(p.get("layouts", "nhwc")),
            "--batches",
            _csv(p.get("batches", "8")),
            "--imgsz",
            str(p.get("imgsz", 640)),
            "--device",
            plan.device,
            *_model_argv(step, plan),
        ]
    )
    return args, list(configs(args))


def _model_argv(step: Step, plan: Plan) -> list[str]:
    """``--model`` / ``--input-shape`` of a profiling step (its ``model`` param, or the plan's)."""
    p = model_params(step, plan)
    out = ["--model", _csv(p["models"])] if p.get("models") else []
    return out + (["--input-shape", _csv(p["input_shape"])] if p.get("input_shape") else [])


def _engines(args, grid, backend: str, device: str, compile_mode: str = "default"):
    """(label, engine, input) for each config of a profiling step's grid, one model per width."""

    return engines(args.family, grid, args.imgsz, device, backend, compile_mode)


def _csv(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _with_provenance(df, device: str):

    prov = collect(device)
    return df.assign(**{f"prov_{k}": v for k, v in prov.items() if not isinstance(v, dict)})


def _run_ncu(step, plan, out_dir, deadline, progress):
    import tempfile

    args, _ = _configs(step, plan)
    p = step.params
    target = target_argv(
        args.family,
        args.widths,
        args.precisions,
        args.layouts,
        args.batches,
        args.imgsz,
        plan.device,
        models=args.model or None,
        input_shape=args.input_shape,
    )
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        df = ncu.profile(
            target,
            Path(tmp) / "ncu.csv",
            metric_set=p.get("metric_set", "occupancy"),
            timeout_s=float(p.get("timeout_s", 540)),
            # the full report beside the table, for the Nsight Compute GUI
            report=out_dir / f"{Path(step.out).stem}.ncu-rep",
            kernel_regex=p.get("kernel_regex"),
        )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def trace_spec(step: Step, plan: Plan) -> TraceSpec:
    """A trace step's configs (:class:`yolo_sm.core.profiling.trace_units.TraceSpec`)."""
    args, grid = _configs(step, plan)
    p = step.params
    return TraceSpec(
        name=step.name,
        family=args.family,
        grid=tuple(grid),
        imgsz=args.imgsz,
        device=plan.device,
        backend=p.get("backend", "eager"),
        compile_mode=p.get("compile_mode", "default"),
        iters=int(p.get("iters", 2)),
    )


def _run_trace(step, plan, out_dir, deadline, progress):
    """Each config's PyTorch-profiler trace and kernel rows, config by config
    (yolo_sm.core.profiling.trace_units)."""

    _units_to_deadline(run_traces, trace_spec(step, plan), step, out_dir, deadline, progress)


def _run_gpm(step, plan, out_dir, deadline, progress):
    """Each config runs back to back for ``seconds`` while the sampler marks it; idle gaps of
    ``gap_s`` separate configs so the timeline shows where each starts."""

    args, grid = _configs(step, plan)
    built = list(_engines(args, grid, step.params.get("backend", "eager"), plan.device))
    frame, info = run_gpm(
        built,
        seconds=float(step.params.get("seconds", 3.0)),
        gap_s=float(step.params.get("gap_s", 0.5)),
        hz=float(step.params.get("hz", 20)),
    )
    _write(_with_provenance(frame, plan.device), step_path(step, out_dir), {"sampler": info})
    for _, eng, _ in built:
        eng.close()


def _write(df, path: Path, metadata: dict | None = None) -> None:

    write_atomic(df, path, metadata)


def _run_ceilings(step, plan, out_dir, deadline, progress):
    """Matmul peaks per precision, copy bandwidths, one frame's host-to-device copy."""

    p = step.params
    df = measure_ceilings(
        plan.device,
        n=tuple(p["n"]) if isinstance(p.get("n"), list) else int(p.get("n", 8192)),
        copy_bytes=int(p.get("copy_bytes", 1 << 30)),
        budget_ms=float(p.get("budget_ms", 300)),
        fill=str(p.get("fill", "randn")),
    )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_numerics(step, plan, out_dir, deadline, progress):
    """Numerical error per width and precision on random inputs and the bundled photos, and
    box agreement after NMS (yolo_sm.core.numerics.numerics_table), with provenance."""

    p = dict(step.params)
    unknown = set(p) - set(inspect.signature(numerics.numerics_table).parameters) - {"device"}
    if unknown:
        raise UserError(f"plan step {step.name}: unknown numerics params {sorted(unknown)}")
    for k in ("widths", "precisions", "photo_precisions", "box_precisions", "seeds") + (
        "int8_calibrations",
        "class_priors",
    ):
        if k in p:
            p[k] = tuple(p[k]) if isinstance(p[k], (list, tuple)) else (p[k],)
    if "class_priors" in p:
        p["class_priors"] = tuple(parse_bool(v, "class_priors") for v in p["class_priors"])
    df = numerics.numerics_table(device=plan.device, **p)
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_probe(step, plan, out_dir, deadline, progress):
    """A frames-to-boxes batch stage by stage (yolo_sm.topics.deploy.collect_probe), with
    provenance."""

    p = step.params
    df = probe_pipeline(
        family=str(p.get("family", "yolov8")),
        width=float(p.get("width", 0.5)),
        batch=int(p.get("batch", 16)),
        reps=int(p.get("reps", 10)),
        device=plan.device,
        imgsz=int(p.get("imgsz", 640)),
        frames=str(p.get("frames", "bus")),
    )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_model_tables(step, plan, out_dir, deadline, progress):
    """Shapes, FLOPs and bytes per model and layer (yolo_sm.core.model_tables), counted on
    this host's CPU whatever the plan's device (they do not depend on the GPU): the provenance
    says so."""

    p = step.params
    model = model_params(step, plan).get("models")
    default = [{"model": m} for m in _csv(model).split(",")] if model else DEFAULT_MODELS
    df = model_layers(
        p.get("models", default),
        imgsz=int(p.get("imgsz", 640)),
        bytes_per_element=int(p.get("bytes_per_element", 2)),
    )
    df = _with_provenance(df, "cpu")
    empty = [c for c in df if c.startswith("prov_") and df[c].isna().all()]  # no GPU here
    _write(df.drop(columns=empty), step_path(step, out_dir))


def _run_bench(step, plan, out_dir, deadline, progress):
    """Baseline, engines, pipeline per stream count and YOLO.predict per (model, batch); rows
    carry their own provenance. Resumes per (model, batch), skips one that would end past
    the deadline (yolo_sm.core.bench)."""

    run_bench(
        bench_spec(step, plan), step_path(step, out_dir), progress=progress, deadline=deadline
    )


def _run_techniques(step, plan, out_dir, deadline, progress):
    """Fusion, autocast and the batch buffer side by side in one process
    (yolo_sm.topics.techniques.collect.techniques_table), with provenance."""
    p = dict(step.params)
    for k in (
        "techniques",
        "backends",
        "resnet_batches",
        "widths",
        "autocast_batches",
        "buffer_batches",
    ):
        if k in p:
            p[k] = tuple(p[k]) if isinstance(p[k], (list, tuple)) else (p[k],)
    df = techniques_table(device=plan.device, **p)
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_compile_cache(step, plan, out_dir, deadline, progress):
    """A cold and a warm torch.compile build per (width, mode), each in a fresh process
    (yolo_sm.topics.deploy.collect)."""

    _units_to_deadline(run_cache_builds, cache_spec(step, plan), step, out_dir, deadline, progress)


def _units_to_deadline(run, spec, step, out_dir, deadline, progress) -> None:
    """``run(spec, out, ...)`` of a step that runs (width, ...) units to ``deadline``: a unit
    it has nothing to estimate by counts as its share of the step's ``est_s``."""
    est_unit_s = step.est_s / len(spec.units())
    run(spec, step_path(step, out_dir), progress=progress, deadline=deadline, est_unit_s=est_unit_s)


RUNNERS = {
    "techniques": _run_techniques,
    "sweep": _run_sweep,
    "ncu": _run_ncu,
    "numerics": _run_numerics,
    "trace": _run_trace,
    "gpm": _run_gpm,
    "ceilings": _run_ceilings,
    "bench": _run_bench,
    "probe": _run_probe,
    "model_tables": _run_model_tables,
    "compile_cache": _run_compile_cache,
}


# --- activation lifetimes and the caching allocator's pool (collect.memory) -----------------


def _run_memory_lifetimes(step, plan, out_dir, deadline, progress):
    """Activation lifetimes per layer and tensor of each model's forward, with the measured
    peak on a GPU (yolo_sm.topics.memory.collect_lifetimes)."""
    p = step.params
    df = lifetimes_table(
        p.get("models", DEFAULT_LIFETIME_MODELS),
        batch=int(p.get("batch", 16)),
        imgsz=int(p.get("imgsz", 640)),
        precision=str(p.get("precision", "fp16")),
        layout=str(p.get("layout", "nhwc")),
        device=plan.device,
    )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


def _run_memory_pool(step, plan, out_dir, deadline, progress):
    """One run of random batch sizes per allocator configuration, each in its own process
    (yolo_sm.topics.memory.collect_pool)."""
    p = dict(step.params)
    confs = p.pop("confs", ALLOC_CONFS)
    timeout = float(p.pop("timeout_s", 300))
    if "family" in p:
        p["model"] = p.pop("family")
    df = pool_table(
        tuple(confs) if isinstance(confs, (list, tuple)) else (confs,),
        timeout_s=timeout,
        device=plan.device,
        **p,
    )
    _write(_with_provenance(df, plan.device), step_path(step, out_dir))


RUNNERS["memory_lifetimes"] = _run_memory_lifetimes
RUNNERS["memory_pool"] = _run_memory_pool


# --- model shapes and input shapes ----------------------------------------------------------


def _run_wide_vs_deep(step, plan, out_dir, deadline, progress):
    """FLOPs-matched wide and deep YOLO pairs timed side by side
    (yolo_sm.topics.wide_deep.collect)."""

    spec = WideDeepSpec.from_mapping({"device": plan.device, **step.params})
    run_wide_vs_deep(spec, step_path(step, out_dir), progress=progress, deadline=deadline)


def _run_resolutions(step, plan, out_dir, deadline, progress):
    """Fixed-shape engines per resolution against one dynamic engine
    (yolo_sm.topics.resolutions.collect)."""

    spec = ResolutionSpec.from_mapping({"device": plan.device, **step.params})
    run_resolutions(spec, step_path(step, out_dir), progress=progress)


RUNNERS["wide_vs_deep"] = _run_wide_vs_deep
RUNNERS["resolutions"] = _run_resolutions


def _run_sharing(step, plan, out_dir, deadline, progress):
    """Two engines at once, alone and together (yolo_sm.topics.sharing.collect): the step's table,
    and beside it ``<step>_gpm`` (the GPM timeline) and ``<step>_kernels`` (kernel classes of
    the short traces), registered here, before the runner registers the step's own."""
    tables = run_sharing_step(step.params, plan.device)
    stem = Path(step.out).stem
    command = registration_command(plan, out_dir, step)
    for suffix, kind in (("gpm", "gpm"), ("kernels", "sharing_kernels")):
        if tables[suffix].empty:  # a CPU: no GPM, no GPU kernels
            continue
        name, file = f"{step.name}_{suffix}", f"{stem}_{suffix}.parquet"
        _write(_with_provenance(tables[suffix], plan.device), inside(out_dir, file, name))
        what = {"gpm": "NVML GPM timeline (with board power)", "kernels": "kernel classes"}
        reg(
            out_dir,
            name,
            file,
            kind,
            f"{what[suffix]} of {step.name}: {step.description}",
            command,
            params=model_params(step, plan),
        )
    _write(
        _with_provenance(tables["sharing"], plan.device),
        step_path(step, out_dir),
        {"sampler": tables["sampler"]},
    )


RUNNERS["sharing"] = _run_sharing


# --- live monitoring beside a bench -----------------------------------------------------------


def _run_monitor(step, plan, out_dir, deadline, progress):
    """The live monitor (collect.monitor: dcgm-exporter's fields every ``interval`` s, on
    ``/metrics`` at 127.0.0.1:``port``, 0 = a free one) while the step's bench (the bench
    kind's params) runs in this process and labels the samples with what it runs; ``idle_s``
    of idle before and after. Without prometheus_client the samples are recorded all the same
    (no endpoint). The bench's own table is not kept: the step's dataset is the
    monitor's samples (kind ``monitor``)."""
    import tempfile

    p = dict(step.params)
    interval = float(p.pop("interval", 1.0))
    port = int(p.pop("port", 0))
    idle_s = float(p.pop("idle_s", 2.0))
    spec = BenchSpec.from_mapping({"device": plan.device, **p})
    if not spec.on_gpu:
        raise UserError(f"plan step {step.name} monitors a GPU: the plan's device must be cuda")
    mon = Monitor(index=nvml_index(plan.device), interval=interval)
    try:
        server = serve(mon, port=port, address="127.0.0.1")
        print(f"collect: {step.name}: /metrics at {server.url}", file=sys.stderr, flush=True)
    except NotAvailableError as e:  # prometheus_client missing: the samples are still recorded
        server = None
        print(f"collect: {step.name}: no /metrics ({e})", file=sys.stderr, flush=True)
    try:
        with mon, tempfile.TemporaryDirectory(dir=out_dir) as tmp:
            time.sleep(idle_s)
            try:
                run_bench(spec, Path(tmp) / "bench.parquet", progress=progress)
            finally:
                clear_workload()
            time.sleep(idle_s)
    finally:
        if server is not None:
            server.close()
    meta = {"monitor": {"interval_s": interval, "ticks": mon.ticks}, "bench": str(spec)}
    _write(record_frame(mon), step_path(step, out_dir), meta)


RUNNERS["monitor"] = _run_monitor


def _run_int8_kernels(step, plan, out_dir, deadline, progress):
    """Each int8 convolution kernel per convolution and per model, beside fp16
    (yolo_sm.topics.precision.collect)."""
    spec = int8_kernel_spec(step, plan)
    _units_to_deadline(run_int8_kernels, spec, step, out_dir, deadline, progress)


RUNNERS["int8_kernels"] = _run_int8_kernels

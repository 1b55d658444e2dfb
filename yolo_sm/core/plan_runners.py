"""The runners of a collection plan's steps (:data:`RUNNERS`, one per step kind): each builds its
kind's spec from the step's params and writes its table atomically into ``out_dir``."""

from __future__ import annotations

import itertools
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.manifest import register as reg
from yolo_sm.contract.plans import Plan, Step
from yolo_sm.contract.scrub import shown_path
from yolo_sm.contract.steps import BenchStep, Models
from yolo_sm.contract.store import inside, write_atomic
from yolo_sm.contract.workload import clear as clear_workload
from yolo_sm.core import numerics
from yolo_sm.core.bench import BenchSpec, run_bench
from yolo_sm.core.devices import nvml_index
from yolo_sm.core.model_tables import DEFAULT_MODELS, model_layers
from yolo_sm.core.models.spec import parse_models
from yolo_sm.core.profiling import ncu
from yolo_sm.core.profiling.suite import engines
from yolo_sm.core.profiling.suite import run_gpm as run_gpm_timeline
from yolo_sm.core.profiling.target import target_argv
from yolo_sm.core.profiling.trace_units import TraceSpec, run_traces
from yolo_sm.core.provenance import stamp
from yolo_sm.core.sweep import SweepSpec, run_sweep
from yolo_sm.topics import STEPS, load
from yolo_sm.topics.deploy.collect import run_cache_builds
from yolo_sm.topics.deploy.collect_probe import probe_pipeline
from yolo_sm.topics.memory.collect import ALLOC_CONFS, lifetimes_table, pool_table
from yolo_sm.topics.monitor.collect import Monitor
from yolo_sm.topics.monitor.collect_exporter import record_frame, serve
from yolo_sm.topics.precision.collect import Int8KernelSpec
from yolo_sm.topics.precision.collect import run_int8_kernels as run_int8_kernels_units
from yolo_sm.topics.resolutions.collect import ResolutionSpec
from yolo_sm.topics.resolutions.collect import run_resolutions as run_resolution_engines
from yolo_sm.topics.roofline.collect import measure_ceilings
from yolo_sm.topics.sharing.collect import DEFAULT_PAIRS
from yolo_sm.topics.sharing.collect import run_sharing as run_sharing_pairs
from yolo_sm.topics.techniques.collect import techniques_table
from yolo_sm.topics.wide_deep.collect import WideDeepSpec
from yolo_sm.topics.wide_deep.collect import run_wide_vs_deep as run_wide_vs_deep_pairs


def model_params(step: Step, plan: Plan) -> dict:
    """A step's params with its ``model`` (or the plan's) as ``models``."""
    p = dict(step.params)
    model = p.pop("model", None) or plan.model or None
    return {**p, "models": model} if model else p


def step_spec(step: Step, plan: Plan, cls=None):
    """The spec of ``step`` (its kind's, or ``cls``) on the plan's device and model."""
    cls = cls or STEPS[step.kind][0]
    fields = cls.params()
    p = model_params(step, plan) if issubclass(cls, Models) else dict(step.params)
    device = {"device": plan.device} if "device" in fields else {}
    return cls.from_mapping({**device, **p}, f"step {step.name}")


def sweep_spec(step: Step, plan: Plan):
    return step_spec(step, plan, SweepSpec)


def bench_spec(step: Step, plan: Plan):
    return BenchSpec.from_step(step_spec(step, plan, BenchStep))


def given(spec) -> dict:
    """A spec's fields that are set (None: the collector's default)."""
    return {k: val for k in spec.params() if (val := getattr(spec, k)) is not None}


def step_path(step: Step, out_dir: Path) -> Path:
    """The output file of ``step``, checked to stay inside ``out_dir``."""
    return inside(out_dir, step.out, f"plan step {step.name}'s out")


def registration_command(plan: Plan, out_dir: Path, step: Step) -> str:
    """The command recorded for a step's dataset, as a user would type it."""
    return (
        f"yolo-sm collect --plan {shown_path(str(Path(plan.path or plan.name).absolute()))} "
        f"--out {shown_path(str(out_dir.absolute()))} --only {step.name}"
        + (f" --model {plan.model}" if plan.model else "")
        + plan.flags
    )


def _csv(x) -> str:
    return ",".join(map(str, x)) if isinstance(x, (list, tuple)) else str(x)


def _write(df, step, plan, out_dir, metadata=None, device=None) -> None:
    """``df`` with provenance (of ``device``, else the plan's) as the step's table."""
    write_atomic(df.assign(**stamp(device or plan.device)), step_path(step, out_dir), metadata)


def _spec_runner(fn, make=step_spec, est_unit_s: bool = False):
    """The runner of a resumable step: ``fn(its spec by make, its table, progress, deadline)``;
    ``est_unit_s``: a unit is guessed at its share of the step's ``est_s``."""

    def run(step, plan, out_dir, deadline, progress):
        spec = make(step, plan)
        kw = {"est_unit_s": step.est_s / len(spec.units())} if est_unit_s else {}
        fn(spec, step_path(step, out_dir), progress=progress, deadline=deadline, **kw)

    return run


def _table_runner(fn):
    """The runner of a step whose table is ``fn(device=..., **the step's set params)``."""

    def run(step, plan, out_dir, deadline, progress):
        kw = {"device": plan.device, **given(step_spec(step, plan))}
        _write(fn(**kw), step, plan, out_dir, device=kw["device"])

    return run


run_sweep_step = _spec_runner(run_sweep, sweep_spec)
run_bench_step = _spec_runner(run_bench, bench_spec)


def grid(spec) -> list[tuple]:
    """(width or model, precision, layout, batch) per config of a profiling step's spec."""
    shape = _csv(spec.input_shape) if spec.input_shape else None
    keys = parse_models(_csv(spec.models), shape, False) if spec.models else spec.widths
    return list(itertools.product(keys, spec.precisions, spec.layouts, spec.batches))


def run_ncu(step, plan, out_dir, deadline, progress):
    """Nsight Compute's metrics per kernel of the step's grid, the report beside the table."""
    spec = step_spec(step, plan)
    target = target_argv(
        spec.family, _csv(spec.widths), _csv(spec.precisions), _csv(spec.layouts),
        _csv(spec.batches), spec.imgsz, plan.device, models=_csv(spec.models) or None,
        input_shape=_csv(spec.input_shape) if spec.input_shape else None,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        df = ncu.profile(
            target,
            Path(tmp) / "ncu.csv",
            metric_set=spec.metric_set,
            timeout_s=spec.timeout_s,
            report=out_dir / f"{Path(step.out).stem}.ncu-rep",
            kernel_regex=spec.kernel_regex,
        )
    _write(df, step, plan, out_dir)


def trace_spec(step: Step, plan: Plan) -> TraceSpec:
    spec = step_spec(step, plan)
    return TraceSpec(
        step.name, spec.family, tuple(grid(spec)), spec.imgsz, plan.device, spec.backend,
        spec.compile_mode, spec.iters,
    )  # fmt: skip


run_trace = _spec_runner(run_traces, trace_spec, est_unit_s=True)


def run_gpm(step, plan, out_dir, deadline, progress):
    """Each config for ``seconds`` under the GPM sampler, ``gap_s`` of idle between them."""
    spec = step_spec(step, plan)
    built = list(engines(spec.family, grid(spec), spec.imgsz, plan.device, spec.backend))
    frame, info = run_gpm_timeline(built, seconds=spec.seconds, gap_s=spec.gap_s, hz=spec.hz)
    _write(frame, step, plan, out_dir, {"sampler": info})
    for _, eng, _ in built:
        eng.close()


def run_model_tables(step, plan, out_dir, deadline, progress):
    """Shapes, FLOPs and bytes per model and layer, counted on this host's CPU (provenance too)."""
    spec = step_spec(step, plan)
    model = model_params(step, plan).get("models")
    default = [{"model": m} for m in _csv(model).split(",")] if model else DEFAULT_MODELS
    df = model_layers(
        list(spec.models or default), imgsz=spec.imgsz, bytes_per_element=spec.bytes_per_element
    )
    df = df.assign(**stamp("cpu"))
    empty = [c for c in df if c.startswith("prov_") and df[c].isna().all()]  # no GPU here
    write_atomic(df.drop(columns=empty), step_path(step, out_dir))


def run_ceilings(step, plan, out_dir, deadline, progress):
    kw = given(step_spec(step, plan))
    if "n" in kw:
        kw["n"] = kw["n"][0] if len(kw["n"]) == 1 else kw["n"]
    _write(measure_ceilings(plan.device, **kw), step, plan, out_dir)


run_numerics = _table_runner(numerics.numerics_table)
run_probe = _table_runner(probe_pipeline)
run_techniques = _table_runner(techniques_table)


run_compile_cache = _spec_runner(run_cache_builds, est_unit_s=True)
run_int8_kernels = _spec_runner(
    run_int8_kernels_units, partial(step_spec, cls=Int8KernelSpec), est_unit_s=True
)
run_memory_lifetimes = _table_runner(lifetimes_table)


def run_memory_pool(step, plan, out_dir, deadline, progress):
    kw = given(step_spec(step, plan))
    if "family" in kw:
        kw["model"] = kw.pop("family")
    df = pool_table(kw.pop("confs", ALLOC_CONFS), device=plan.device, **kw)
    _write(df, step, plan, out_dir)


run_wide_vs_deep = _spec_runner(run_wide_vs_deep_pairs, partial(step_spec, cls=WideDeepSpec))


def run_resolutions(step, plan, out_dir, deadline, progress):
    spec = step_spec(step, plan, ResolutionSpec)
    run_resolution_engines(spec, step_path(step, out_dir), progress=progress)


def run_sharing(step, plan, out_dir, deadline, progress):
    """Two engines alone and together; beside the step's table ``<step>_gpm`` and
    ``<step>_kernels``, registered here."""
    kw = given(step_spec(step, plan))
    tables = run_sharing_pairs(kw.pop("pairs", DEFAULT_PAIRS), plan.device, **kw)
    stem = Path(step.out).stem
    command = registration_command(plan, out_dir, step)
    what = {"gpm": "NVML GPM timeline (with board power)", "kernels": "kernel classes"}
    for suffix, kind in (("gpm", "gpm"), ("kernels", "sharing_kernels")):
        if tables[suffix].empty:  # a CPU: no GPM, no GPU kernels
            continue
        name, file = f"{step.name}_{suffix}", f"{stem}_{suffix}.parquet"
        df = tables[suffix].assign(**stamp(plan.device))
        write_atomic(df, inside(out_dir, file, name))
        text = f"{what[suffix]} of {step.name}: {step.description}"
        reg(out_dir, name, file, kind, text, command, params=model_params(step, plan))
    _write(tables["sharing"], step, plan, out_dir, {"sampler": tables["sampler"]})


def run_monitor(step, plan, out_dir, deadline, progress):
    """The live monitor's samples (``/metrics`` at 127.0.0.1:``port``) while the step's bench
    runs in this process, ``idle_s`` of idle before and after."""
    mon_spec = step_spec(step, plan)
    spec = BenchSpec.from_step(mon_spec)
    if not spec.on_gpu:
        raise UserError(f"plan step {step.name} monitors a GPU: the plan's device must be cuda")
    mon = Monitor(index=nvml_index(plan.device), interval=mon_spec.interval)
    try:
        server = serve(mon, port=mon_spec.port, address="127.0.0.1")
        print(f"collect: {step.name}: /metrics at {server.url}", file=sys.stderr, flush=True)
    except NotAvailableError as e:  # prometheus_client missing: the samples are still recorded
        server = None
        print(f"collect: {step.name}: no /metrics ({e})", file=sys.stderr, flush=True)
    try:
        with mon, tempfile.TemporaryDirectory(dir=out_dir) as tmp:
            time.sleep(mon_spec.idle_s)
            try:
                run_bench(spec, Path(tmp) / "bench.parquet", progress=progress)
            finally:
                clear_workload()
            time.sleep(mon_spec.idle_s)
    finally:
        if server is not None:
            server.close()
    meta = {"monitor": {"interval_s": mon_spec.interval, "ticks": mon.ticks}, "bench": str(spec)}
    write_atomic(record_frame(mon), step_path(step, out_dir), meta)


#: kind -> runner, as :data:`yolo_sm.topics.STEPS` names them
RUNNERS = {kind: load(ref) for kind, (_, ref) in STEPS.items()}

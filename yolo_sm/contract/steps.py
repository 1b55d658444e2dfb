"""The generic step kinds (sweep, bench, the profilers, the model tables): their frozen specs
and :data:`GENERIC`, the kind table the topics' own kinds join (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.values import Spec, param
from yolo_sm.contract.vocab import PIPELINE_MODES, Backend, Layout, Precision

#: most profiled forwards of one trace
MAX_ITERS = 1000


def choices(enum) -> tuple[str, ...]:
    return tuple(m.value for m in enum)


precision_names = v.check(v.texts, choices=choices(Precision))
layout_names = v.check(v.texts, choices=choices(Layout))
backend_names = v.check(v.texts, choices=choices(Backend))
one_precision, one_layout, one_backend = (
    v.one(precision_names),
    v.one(layout_names),
    v.one(backend_names),
)


def depths(x, what):
    """Depth multipliers; ``none`` for the family's own."""
    xs = [None] if x is None else list(x) if isinstance(x, (list, tuple)) else v.items(x, what)
    if not xs:
        raise UserError(f"{what} needs at least one value")
    return [
        None if d in (None, "", "none", "None") else v.number(d, what, above=0, hi=4) for d in xs
    ]


def shape(x, what):
    """C,H,W of one input image."""
    return v.wholes(x, what, lo=1, hi=1 << 16)


def model_entries(*optional: str):
    """A check of mappings of ``model`` and the ``optional`` keys (widths, depth, max_channels)."""
    checks = {
        "widths": v.multipliers,
        "depth": v.check(v.number, above=0, hi=4),
        "max_channels": v.check(v.whole, lo=1, hi=1 << 20),
    }

    def entries(x, what):
        entries = x if isinstance(x, (list, tuple)) else [x]
        if not entries:
            raise UserError(f"{what} needs at least one model")
        for e in entries:
            unknown = sorted(set(v.mapping(e, what)) - {"model", *optional})
            if "model" not in e or unknown:
                raise UserError(
                    f"each entry of {what} needs 'model' and may have {', '.join(optional)}"
                    + (f"; unknown {', '.join(unknown)}" if unknown else "")
                )
            v.text(e["model"], f"{what} model")
            for k in set(optional) & set(e):
                checks[k](e[k], f"{what} {k}")
        return entries

    return entries


MODEL_HELP = (
    "family:width (yolov8:0.5, yolo11:n), an ultralytics model YAML or .pt checkpoint, or "
    "package.module:function (imports and runs your code, by design); comma list"
)


@dataclass(frozen=True)
class Models(Spec):
    """A step's own model spec(s) (yolo_sm.core.models.spec) and their input shape."""

    model: tuple = param(v.texts, (), "the same as --models")
    models: tuple = param(v.texts, (), MODEL_HELP)
    input_shape: tuple | None = param(shape, None, "C,H,W of one input image")

    def validated(self):
        if not self.model:
            return self
        return type(self)(**{**vars(self), "model": (), "models": self.model + self.models})


@dataclass(frozen=True)
class SweepStep(Models):
    """A grid of timed points: lists are crossed; ``widths`` mixes multipliers and presets."""

    kind = "sweep"
    family: tuple = param(v.texts, ("yolov8",), "comma list: yolov8,yolo11")
    widths: tuple = param(v.widths, (1.0,), "comma list of multipliers or presets n,s,m,l,x")
    depth: tuple = param(depths, (None,), "comma list of depth multipliers (none: the family's)")
    precisions: tuple = param(
        precision_names, ("fp16",), "comma list: " + ",".join(choices(Precision))
    )
    layouts: tuple = param(layout_names, ("nhwc",), "comma list: nchw,nhwc")
    backends: tuple = param(backend_names, ("eager",), "comma list: " + ",".join(choices(Backend)))
    batches: tuple = param(v.batches, (1,), "comma list of batch sizes")
    imgsz: tuple = param(v.imgszs, (640,), "comma list of square input sizes (multiples of 32)")
    device: str = param(v.device_name, "cuda", "cpu, cuda or cuda:N")
    max_channels: int = param(v.check(v.whole, lo=1, hi=1 << 20), 2048, "ultralytics cap")
    compile_mode: str = param(
        v.compile_mode, "default", "torch.compile mode; MODE+sep-pool first rewrites each "
        "stride-1 max pool as two 1-D pools (exact)",
    )  # fmt: skip
    warmup_ms: float = param(v.warmup_ms, 50.0, "warm-up milliseconds per point")
    budget_ms: float = param(v.budget_ms, 300.0, "timed milliseconds per point")
    check: bool = param(
        v.flag, True, "on: each engine's output must match eager fp32 within its precision's "
        "tolerance; off: time without the check (its rows say check_input off)",
    )  # fmt: skip


@dataclass(frozen=True)
class BenchStep(Models):
    """Engines side by side per (model, batch): ``models`` (or ``family`` + ``widths``),
    ``engines`` besides the eager baseline, the pipeline's engine, streams and modes."""

    kind = "bench"
    family: str | None = param(v.text, None, "model family (with widths)")
    widths: tuple = param(v.multipliers, (), "width multipliers of family")
    batches: tuple = param(v.batches, (1, 16, 64), "comma list of batch sizes")
    engines: tuple = param(
        v.texts, ("cudagraph/fp16/nhwc", "compile/fp16/nhwc", "compile:reduce-overhead/fp16/nhwc"),
        "comma list of backend[:mode]/precision/layout besides eager/fp16/nhwc",
    )  # fmt: skip
    pipeline_engine: str = param(
        v.text, "compile/fp16/nhwc", "backend[:mode]/precision/layout the pipeline rows wrap"
    )
    pipeline_streams: tuple = param(
        v.check(v.wholes, lo=1, hi=64), (1, 4), "one pipeline row per batches-in-flight count",
        "--streams",
    )  # fmt: skip
    pipeline_modes: tuple = param(
        v.check(v.texts, choices=PIPELINE_MODES), ("graph",),
        "pipeline modes: full (the full NMS), topk (NMS on each frame's best candidates in "
        "fixed-size buffers), graph (topk in one CUDA graph)", "--pipeline",
    )  # fmt: skip
    pipeline_nms_topk: int = param(
        v.check(v.whole, lo=1, hi=1 << 20), 1024, "candidates per frame of the fixed-size NMS",
        "--nms-topk",
    )  # fmt: skip
    device: str = param(v.device_name, "cuda", "cpu, cuda or cuda:N")
    imgsz: int = param(v.imgsz, 640, "square input size")
    budget_ms: float = param(v.budget_ms, 300.0, "timed milliseconds per engine")
    warmup_ms: float = param(v.warmup_ms, 50.0, "warm-up milliseconds per engine")
    seconds: float = param(v.run_s, 1.0, "wall time of each pipeline / predict row")
    predict: bool = param(v.flag, True, "ultralytics' YOLO.predict rows")
    est_unit_s: float = param(v.seconds, 120.0, "seconds of a unit before one was timed")


@dataclass(frozen=True)
class GridStep(Models):
    """The model grid of a profiling step: ``family`` at ``widths`` (or ``models``) x
    precisions x layouts x batches at one image size."""

    family: str = param(v.text, "yolov8")
    widths: tuple = param(v.multipliers, (1.0,))
    precisions: tuple = param(precision_names, ("fp16",))
    layouts: tuple = param(layout_names, ("nhwc",))
    batches: tuple = param(v.batches, (8,))
    imgsz: int = param(v.imgsz, 640)


@dataclass(frozen=True)
class TraceStep(GridStep):
    """Kineto traces of ``iters`` forwards per config on ``backend``."""

    kind = "trace"
    iters: int = param(v.check(v.whole, lo=1, hi=MAX_ITERS), 2)
    backend: str = param(one_backend, "eager")
    compile_mode: str = param(v.compile_mode, "default")


@dataclass(frozen=True)
class NcuStep(GridStep):
    """Nsight Compute's ``metric_set`` per kernel (those matching ``kernel_regex``)."""

    kind = "ncu"
    metric_set: str = param(
        v.check(v.text, choices=("occupancy", "throughput", "full", "stalls")), "occupancy"
    )
    timeout_s: float = param(v.seconds, 540.0)
    kernel_regex: str | None = param(v.text, None)


@dataclass(frozen=True)
class GpmStep(GridStep):
    """Each config for ``seconds`` back to back under the GPM sampler at ``hz``, ``gap_s`` of
    idle between configs."""

    kind = "gpm"
    seconds: float = param(v.run_s, 3.0)
    gap_s: float = param(v.gap_s, 0.5)
    hz: float = param(v.check(v.number, above=0, hi=1000, unit="Hz"), 20.0)
    backend: str = param(one_backend, "eager")


@dataclass(frozen=True)
class ModelTablesStep(Spec):
    """Shapes, FLOPs and bytes per layer of ``models`` (None: the default models)."""

    kind = "model_tables"
    models: tuple | None = param(model_entries("widths", "depth", "max_channels"), None)
    imgsz: int = param(v.imgsz, 640)
    bytes_per_element: int = param(v.check(v.whole, lo=1, hi=8), 2)


_RUN = "yolo_sm.core.plan_runners:"
#: the generic kinds: kind -> (spec, runner as "module:function")
GENERIC = {
    "sweep": (SweepStep, _RUN + "run_sweep_step"),
    "bench": (BenchStep, _RUN + "run_bench_step"),
    "trace": (TraceStep, _RUN + "run_trace"),
    "ncu": (NcuStep, _RUN + "run_ncu"),
    "gpm": (GpmStep, _RUN + "run_gpm"),
    "model_tables": (ModelTablesStep, _RUN + "run_model_tables"),
}

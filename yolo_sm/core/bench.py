"""Side-by-side benchmark: for each model and batch size, the eager
fp16 NHWC baseline, each other engine, our end-to-end pipeline (one row per stream count) and
ultralytics' own ``YOLO.predict``, measured in one go so the ratios are like for like.

Engine rows (``scope`` ``model_only``) time the forward alone (the sweep's ``run_point``,
CUDA events); ``pipeline/...`` and ``ultralytics_predict`` rows (``frames_to_boxes``) time
frames to boxes (uint8 frames in, NMS-ed boxes on the host out, wall clock per batch). On a GPU
the pipeline's frames sit in pinned host memory, as a camera's ring of pinned buffers would
deliver them (column ``pinned``), and ``streams`` batches are in flight. Each pipeline row also
carries the model-only img/s of the very engine instance it wraps (``model_only_img_per_s``,
timed just before) and their ratio, ``pipeline_vs_model_only``.

A (model, batch) pair is the unit of work of the grid runner
(:func:`yolo_sm.core.grid.run_grid`): its rows are written (atomically) when it is done, a
rerun skips complete units and re-measures incomplete ones whole (a variant added to the spec
later is measured together with a fresh baseline, so its ratio stays like for like), and a
model's batches run together. With a ``deadline`` the run skips a model whose units would not
fit and goes on with the next that fit (estimate per unit: :func:`_estimate`, the longest unit
of the same batch at the nearest width measured so far, scaled to the unit's width, else
``est_unit_s``). A variant
that fails (not available, out of memory, numerically rejected) becomes a row with ``status``
error / oom and a one-line message.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, fields, replace

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.vocab import PIPELINE_MODES
from yolo_sm.contract.workload import clear, publish
from yolo_sm.core.engines import EngineConfig, build_engine, check_device
from yolo_sm.core.engines.config import (
    Backend,
    Layout,
    Precision,
    check_compile_mode,
    check_device_name,
)
from yolo_sm.core.grid import (
    Pace,
    free_memory,
    longest_by_width,
    parse_bool,
    parse_float,
    parse_int,
    pending,
    run_grid,
    split_list,
    table_rows,
    width_scaled,
)
from yolo_sm.core.images import bundled_images
from yolo_sm.core.models import (
    FAMILIES,
    MAX_WIDTH,
    MIN_WIDTH,
    YoloForward,
    build_yolo,
    model_flops,
)
from yolo_sm.core.models.spec import build_spec, parse_model, spec_scale
from yolo_sm.core.nms import nms_label
from yolo_sm.core.pipeline import (
    DetectionPipeline,
    PipelineConfig,
    measure_pipeline,
    set_class_prior,
)
from yolo_sm.core.provenance import collect
from yolo_sm.core.stopwatch import phase
from yolo_sm.core.sweep import Point, SweepSpec, failure, run_point
from yolo_sm.core.timing import measure_captured, measure_engine
from yolo_sm.topics.deploy import BENCH_DEFAULTS

BASELINE = ("eager", "fp16", "nhwc")
# the default paths (defined once, with the CLI's: yolo_sm.topics.deploy.BENCH_DEFAULTS)
DEFAULT_ENGINES = tuple(tuple(e.split("/")) for e in BENCH_DEFAULTS["engines"])
PIPELINE_ENGINE = tuple(BENCH_DEFAULTS["pipeline_engine"].split("/"))
DEFAULT_MODEL = BENCH_DEFAULTS["models"].split(":")
# on a CPU there is no CUDA graph and fp16 convolutions are emulated (slow): the CPU pipeline
# wraps eager fp32, and it runs one batch at a time whatever ``streams`` says
# (yolo_sm.core.pipeline)
CPU_PIPELINE_ENGINE = ("eager", "fp32", "nhwc")
PREDICT = "ultralytics_predict"
UNIT = ("family", "width", "batch")
# run_point columns carried into engine rows
_POINT_COLUMNS = (
    "status",
    "message",
    "median_ms",
    "iqr_ms",
    "p99_ms",
    "img_per_s",
    "n_samples",
    "noisy",
    "rel_err",
    "check_input",
    "tflops",
    "flops_per_img",
    "peak_mem_bytes",
    "build_s",
    "compile_s",
    "compile_first_s",
    "capture_s",
    "warmup_s",
    "warmup_settled",
    "timed_s",
    "profile_s",
    "compile_cache",
    "autotuned_ops",
    "autotune_reads",
    "host_cpu_ms",
    "launches_per_forward",
    "kernels_per_forward",
    "gpu_busy_ms",
    "host_launch_us",
    "gpu_busy_fraction",
    "host_bound",
    "quant_convs",
    "quant_fallbacks",
    "quant_handoffs",
    "quant_plans_cached",
)


def variant_name(engine) -> str:
    """``backend[:mode]/precision/layout``."""
    return "/".join(engine)


def pipeline_variant(engine, streams: int, mode: str = "full") -> str:
    """``pipeline/<engine variant>/s<streams>``, with ``/<mode>`` before the streams for a mode
    other than ``full`` (the streams stay last: rows differing only in them share the rest)."""
    mid = "" if mode == "full" else f"/{mode}"
    return f"pipeline/{variant_name(engine)}{mid}/s{int(streams)}"


def pipeline_config(streams: int, mode: str, topk: int) -> PipelineConfig:
    """The PipelineConfig of a pipeline row of ``mode`` (:data:`PIPELINE_MODES`)."""
    return PipelineConfig(
        streams=int(streams), nms_topk=0 if mode == "full" else int(topk), graph=mode == "graph"
    )


def parse_engine(item) -> tuple[str, str, str]:
    """``backend[:mode]/precision/layout`` (a string or a 3-sequence) -> a checked triple; a
    typo is one sentence, while an engine that cannot run here becomes an error row later."""

    # a plan's scalar (a YAML number) is text as the plan check reads it: one sentence below
    items = item if isinstance(item, (list, tuple)) else str(item).split("/")
    parts = [str(x).strip().lower() for x in items]
    if len(parts) != 3:
        raise UserError(f"engines are backend/precision/layout items, got {item!r}")
    backend, _, mode = parts[0].partition(":")
    for value, enum, what in (
        (backend, Backend, "backend"),
        (parts[1], Precision, "precision"),
        (parts[2], Layout, "layout"),
    ):
        if value not in {m.value for m in enum}:
            choices = ", ".join(m.value for m in enum)
            raise UserError(f"unknown {what} {value!r} in engine {item!r}: choose one of {choices}")
    if mode:
        if backend != "compile":
            raise UserError(f"only the compile backend takes a mode, got {parts[0]!r}")
        check_compile_mode(mode)
    return (parts[0], parts[1], parts[2])


@dataclass(frozen=True)
class BenchSpec:
    """What to bench. ``models``: (family, width) pairs; ``engines``: variants besides the
    :data:`BASELINE`; ``pipeline_streams``: one pipeline row per value; ``seconds``: wall time
    of each pipeline / predict row; ``est_unit_s``: the guess for a unit before one was timed."""

    models: tuple = ((DEFAULT_MODEL[0], float(DEFAULT_MODEL[1])),)
    batches: tuple = BENCH_DEFAULTS["batches"]
    engines: tuple = DEFAULT_ENGINES
    pipeline_engine: tuple = PIPELINE_ENGINE
    pipeline_streams: tuple = BENCH_DEFAULTS["pipeline_streams"]
    # pipeline rows per stream count, one per mode (PIPELINE_MODES), and the candidates per
    # frame of the fixed-size NMS of the topk and graph modes (PipelineConfig.nms_topk)
    pipeline_modes: tuple = BENCH_DEFAULTS["pipeline_modes"]
    pipeline_nms_topk: int = BENCH_DEFAULTS["pipeline_nms_topk"]
    device: str = "cuda"
    imgsz: int = 640
    budget_ms: float = 300.0
    warmup_ms: float = 50.0
    seconds: float = BENCH_DEFAULTS["seconds"]
    predict: bool = True
    est_unit_s: float = 120.0
    # (family label, spec text) of the models given as a file (collect.models.spec: a .yaml or
    # an ultralytics .pt); their ``models`` entry is (label, the file's width)
    specs: tuple = ()

    @classmethod
    def from_mapping(cls, data: dict) -> BenchSpec:
        """From plan / CLI keys: ``family`` + ``widths`` (or ``models`` as ``family:width``
        items), ``batches``, ``engines`` (``backend/precision/layout`` strings),
        ``pipeline_engine``, ``pipeline_streams``, ``pipeline_modes``, ``pipeline_nms_topk``,
        ``device``, ``imgsz``, ``budget_ms``, ``warmup_ms``, ``seconds``, ``predict``,
        ``est_unit_s``. A None value means the default (as the plan check reads it)."""

        data = {k: v for k, v in data.items() if v is not None}
        known = {f.name for f in fields(cls)} | {"family", "widths"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(
                f"unknown bench key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        kw = {}
        if "models" in data and ("family" in data or "widths" in data):
            raise UserError("give bench models either as models or as family + widths")
        if "models" in data:
            models, specs = [], []
            for item in split_list(data["models"]):
                m = parse_model(item, need_shape=False)
                if m.kind == "family":
                    models.append((m.source, parse_float(m.width, "width")))
                else:
                    models.append((m.name, spec_scale(m)[0]))
                    specs.append((m.name, m.text))
            kw["models"], kw["specs"] = tuple(models), tuple(specs)
        elif "widths" in data or "family" in data:
            family = str(data.get("family", "yolov8"))
            widths = split_list(data.get("widths", 1.0))
            kw["models"] = tuple((family, parse_float(w, "width")) for w in widths)
        if "batches" in data:
            kw["batches"] = tuple(parse_int(b, "batch") for b in split_list(data["batches"]))
        if "engines" in data:
            kw["engines"] = tuple(parse_engine(e) for e in split_list(data["engines"] or []))
        if "pipeline_engine" in data:
            kw["pipeline_engine"] = parse_engine(data["pipeline_engine"])
        if "pipeline_streams" in data:
            kw["pipeline_streams"] = tuple(
                parse_int(s, "pipeline_streams") for s in split_list(data["pipeline_streams"])
            )
        for k in ("device",):
            if k in data:
                kw[k] = str(data[k])
        if "pipeline_modes" in data:
            kw["pipeline_modes"] = tuple(
                str(m).strip().lower() for m in split_list(data["pipeline_modes"])
            )
        if "pipeline_nms_topk" in data:
            kw["pipeline_nms_topk"] = parse_int(data["pipeline_nms_topk"], "pipeline_nms_topk")
        if "imgsz" in data:
            kw["imgsz"] = parse_int(data["imgsz"], "imgsz")
        for k in ("budget_ms", "warmup_ms", "seconds", "est_unit_s"):
            if k in data:
                kw[k] = parse_float(data[k], k)
        if "predict" in data:
            kw["predict"] = parse_bool(data["predict"], "predict")
        return cls(**kw).validated()

    def validated(self) -> BenchSpec:

        if not self.models or not self.batches:
            raise UserError("bench needs at least one model and one batch size")
        for family, width in self.models:
            if family not in FAMILIES and family not in dict(self.specs):
                raise UserError(
                    f"bench runs YOLO detectors ({', '.join(FAMILIES)}), got family {family!r}"
                )
            if not MIN_WIDTH <= float(width) <= MAX_WIDTH:
                raise UserError(f"width must be between {MIN_WIDTH} and {MAX_WIDTH}, got {width}")
        if any(int(b) != b or b <= 0 for b in self.batches):
            raise UserError("batch sizes must be positive integers")
        if not self.pipeline_streams or any(s < 1 for s in self.pipeline_streams):
            raise UserError("pipeline_streams must be positive integers")
        if not self.pipeline_modes or not set(self.pipeline_modes) <= set(PIPELINE_MODES):
            raise UserError(
                f"pipeline_modes are some of {', '.join(PIPELINE_MODES)}, got "
                f"{', '.join(map(str, self.pipeline_modes)) or 'none'}"
            )
        if self.pipeline_nms_topk < 1:
            raise UserError("pipeline_nms_topk must be a positive count of candidates per frame")
        if self.imgsz <= 0 or self.imgsz % 32:
            raise UserError("imgsz must be a positive multiple of 32")
        if not (self.budget_ms > 0 and self.warmup_ms >= 0 and self.seconds > 0):  # NaN fails
            raise UserError("budget_ms and seconds must be positive, warmup_ms not negative")
        check_device_name(self.device)
        engines = tuple(parse_engine(e) for e in self.engines)
        engines = tuple(e for e in dict.fromkeys(engines) if e != BASELINE)
        return replace(
            self,
            models=tuple((str(f), float(w)) for f, w in dict.fromkeys(self.models)),
            batches=tuple(int(b) for b in dict.fromkeys(self.batches)),
            engines=engines,
            pipeline_engine=parse_engine(self.pipeline_engine),
            pipeline_streams=tuple(int(s) for s in dict.fromkeys(self.pipeline_streams)),
            pipeline_modes=tuple(dict.fromkeys(self.pipeline_modes)),
        )

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    def pipeline_engine_here(self) -> tuple[str, str, str]:
        """The pipeline's engine on this spec's device (:data:`CPU_PIPELINE_ENGINE` on a CPU)."""
        return self.pipeline_engine if self.on_gpu else CPU_PIPELINE_ENGINE

    def pipeline_rows(self) -> list[tuple[str, int]]:
        """(mode, streams) of the pipeline rows of a unit, in run order."""
        return [(m, s) for m in self.pipeline_modes for s in self.pipeline_streams]

    def units(self) -> list[tuple[str, float, int]]:
        """(family, width, batch) in run order: all batches of one model before the next."""
        return [(f, w, b) for f, w in self.models for b in self.batches]

    def variants(self) -> list[str]:
        """The variant names one complete unit holds."""
        out = [variant_name(e) for e in (BASELINE, *self.engines)]
        eng = self.pipeline_engine_here()
        out += [pipeline_variant(eng, s, m) for m, s in self.pipeline_rows()]
        return out + ([PREDICT] if self.predict else [])


def unit_group(unit) -> tuple[str, float]:
    """The group a (family, width, batch) unit runs in: its model, every batch of it in one
    process (what ``run_bench`` builds once)."""
    family, width, _ = unit
    return (family, width)


def _unit_key(family, width, batch) -> tuple:
    return (str(family), round(float(width), 6), int(batch))


def _row_key(row: dict) -> tuple:
    return _unit_key(row["family"], row["width"], row["batch"])


def _complete(spec: BenchSpec):
    """Whether a unit's rows hold every variant of ``spec``."""
    want = set(spec.variants())
    return lambda unit, rows: want <= {r["variant"] for r in rows}


def missing_units(spec: BenchSpec, out) -> list[tuple[str, float, int]]:
    """The units of ``spec`` that ``out`` does not hold completely (all when it is absent)."""
    from pathlib import Path

    spec = spec.validated()
    rows = table_rows(Path(out), (*UNIT, "variant"), "bench")
    return pending(spec.units(), rows, lambda u: _unit_key(*u), _row_key, _complete(spec))


def _estimate(default: float, variants: int | None = None):
    """Seconds the next unit will take, for the deadline: from the longest unit timed so far
    per width (in this run or in the rows read back) of the same family and batch, else of the
    same batch, scaled to the unit's width by :func:`yolo_sm.core.grid.width_scaled` (a
    wider unit builds, autotunes and times more work); ``default`` before any unit of that
    batch was timed. With ``variants`` (the spec's engines, pipeline and predict rows
    included), a unit read back with another number of variants (measured before the spec
    gained or lost engines) counts at its seconds per variant times ``variants``: each variant
    builds and times its own engine."""

    def estimate(unit, pace: Pace) -> float:
        family, width, batch = unit
        rows = per_spec_variants(pace.rows, variants) if variants else pace.rows
        for keep in (
            lambda r: r.get("batch") == batch and r.get("family") == family,
            lambda r: r.get("batch") == batch,
        ):
            est = width_scaled(longest_by_width(rows, keep), width)
            if est is not None:
                return est
        return default

    return estimate


def per_spec_variants(rows: list[dict], variants: int) -> list[dict]:
    """``rows`` with each ``unit_s`` scaled to ``variants`` variants from the number of
    variants its unit's rows hold (rows without a ``variant`` are left as they are): how a
    unit measured with other engines than the spec's counts, in the deadline
    (:func:`_estimate`) and in ``collect --status``."""
    held: dict[tuple, set] = {}
    for r in rows:
        if r.get("variant") is not None:
            held.setdefault(_row_unit(r), set()).add(r["variant"])
    out = []
    for r in rows:
        n = len(held.get(_row_unit(r), ()))
        took = r.get("unit_s")
        out.append({**r, "unit_s": took * variants / n} if n and took is not None else r)
    return out


def _row_unit(r: dict) -> tuple:
    return r.get("family"), r.get("width"), r.get("batch")


def run_bench(
    spec: BenchSpec,
    out=None,
    *,
    progress: bool = True,
    deadline: float | None = None,
    frames=None,
):
    """Bench every unit of ``spec`` that ``out`` does not hold completely (all without ``out``);
    returns the whole table: one row per (family, width, batch, variant) with ``scope``,
    ``status``, ``message``, ``median_ms`` (p50), ``p99_ms``, ``img_per_s``, ``vs_baseline``
    (img/s over the baseline's of the same unit), ``build_s``, the pipeline columns
    (``streams``, ``model_only_img_per_s``, ``pipeline_vs_model_only``), ``unit_s`` and
    ``prov_*``. ``deadline``: a ``time.monotonic()`` value (see the module docstring)."""
    spec = spec.validated()
    check_device(spec.device)
    frames = frames if frames is not None else bundled_frames()
    publish(workload="bench")  # the status file a monitor beside it reads (contract.workload)

    def measure(unit, model) -> list[dict]:
        family, width, batch = unit
        return bench_unit(model, family, width, batch, spec, frames)

    table = run_grid(
        spec.units(),
        measure,
        key=lambda u: _unit_key(*u),
        row_key=_row_key,
        group=unit_group,
        # the model, or an exception object when it fails
        open_group=lambda u: bench_model(u[0], u[1], *([spec.specs] if spec.specs else [])),
        complete=_complete(spec),
        out=out,
        columns=(*UNIT, "variant"),
        kind="bench",
        metadata={"spec": asdict(spec), "argv": sys.argv},
        deadline=deadline,
        estimate=_estimate(spec.est_unit_s, len(spec.variants())),
        clock=time.monotonic,
        seconds_column="unit_s",
        describe=lambda u: f"{u[0]} w{u[1]:g} b{u[2]}",
        progress=progress,
        device=spec.device,
    )
    clear()  # nothing runs any more
    return table


#: (p, spread) of :func:`yolo_sm.core.pipeline.set_class_prior` for the bench's models: class
#: logits centred on log(p / (1 - p)) with this spread, so that NMS has detections to work on
CLASS_PRIOR = (0.001, 1.5)


def bench_model(family: str, width: float, specs=()):
    """The bench's model: a YOLO detector with :data:`CLASS_PRIOR` (so that NMS has
    detections to work on), or the exception its build raised. A model of ``specs`` (a file:
    collect.models.spec) is built from it as it is, its head untouched."""
    try:
        text = dict(specs).get(family)
        if text:
            model = build_spec(text)
            if not isinstance(model, YoloForward):
                raise UserError(f"bench runs YOLO detectors; {text} holds another model")
            return model
        model = build_yolo(family, width)
        set_class_prior(model, *CLASS_PRIOR)  # detections for NMS to do real work
        return model
    except Exception as e:  # noqa: BLE001 - a model that cannot be built becomes error rows
        return e


def bench_unit(model, family: str, width: float, batch: int, spec: BenchSpec, frames) -> list:
    """Rows of one (model, batch): baseline and engines, the pipeline per stream count, predict;
    ``vs_baseline`` against this unit's baseline. ``model`` may be the exception its build
    raised: then every variant is an error row."""

    head = {"family": family, "width": float(width), "batch": int(batch)}
    if isinstance(model, BaseException):
        rows = [
            {**head, "variant": v, "scope": _scope(v), **failure(model)} for v in spec.variants()
        ]
    else:
        flops = model_flops(model, spec.imgsz)
        rows = [_engine_row(model, head, e, spec, flops) for e in (BASELINE, *spec.engines)]
        rows += _pipeline_rows(model, head, spec, frames)
        if spec.predict:
            rows.append(_predict_row(model, head, spec, frames))
    prov = {f"prov_{k}": v for k, v in collect(spec.device).items() if not isinstance(v, dict)}
    base = next(
        (r for r in rows if r["variant"] == variant_name(BASELINE) and r["status"] == "ok"), None
    )
    for r in rows:
        img = r.get("img_per_s")
        r["vs_baseline"] = img / base["img_per_s"] if base and img == img and img else None
        for k, v in prov.items():
            r.setdefault(k, v)
        r["model"] = dict(spec.specs).get(family, f"{family}:{float(width):g}")
    return rows


def _scope(variant: str) -> str:
    pipeline = variant.startswith("pipeline/") or variant == PREDICT
    return "frames_to_boxes" if pipeline else "model_only"


def _engine_columns(engine) -> dict:
    backend, _, mode = engine[0].partition(":")
    return {
        "backend": backend,
        "compile_mode": (mode or "default") if backend == "compile" else "",
        "precision": engine[1],
        "layout": engine[2],
    }


def _engine_row(model, head: dict, engine, spec: BenchSpec, flops: int) -> dict:
    """One engine timed model-only through the sweep's ``run_point`` (build, numerical check
    against eager fp32, CUDA events); failures come back as error / oom rows."""

    cols = _engine_columns(engine)
    p = Point(
        head["family"],
        "",
        head["width"],
        0.33,
        2048,
        cols["precision"],
        cols["layout"],
        cols["backend"],
        head["batch"],
        spec.imgsz,
        cols["compile_mode"] or "default",
        spec.device,
    )
    sweep = SweepSpec(device=spec.device, budget_ms=spec.budget_ms, warmup_ms=spec.warmup_ms)
    r = run_point(model, p, sweep, flops)
    row = {**head, "variant": variant_name(engine), "scope": "model_only", **cols}
    row.update({k: r.get(k) for k in _POINT_COLUMNS})
    row.update({k: v for k, v in r.items() if k.startswith("prov_") and not isinstance(v, dict)})
    return row


def _pipeline_rows(model, head: dict, spec: BenchSpec, frames) -> list[dict]:
    """One engine instance, timed model-only first, then wrapped in a pipeline per stream count
    (frames to boxes); ``pipeline_vs_model_only`` = pipeline frames/s over that img/s."""

    engine = spec.pipeline_engine_here()
    cols = _engine_columns(engine)
    rows = [
        {
            **head,
            "variant": pipeline_variant(engine, s, mode),
            "scope": "frames_to_boxes",
            **cols,
            "streams": s,
            "pipeline_mode": mode,
            "nms": nms_label(0 if mode == "full" else spec.pipeline_nms_topk),
        }
        for mode, s in spec.pipeline_rows()
    ]
    eng = None
    try:
        with phase("build") as build:
            eng = build_engine(
                model,
                EngineConfig(
                    backend=cols["backend"],
                    precision=cols["precision"],
                    layout=cols["layout"],
                    batch=head["batch"],
                    imgsz=spec.imgsz,
                    device=spec.device,
                    compile_mode=cols["compile_mode"] or "default",
                ),
            )
        build_s = build.seconds
        timing = dict(warmup_ms=spec.warmup_ms, budget_ms=spec.budget_ms)
        # graph rows replay the engine's forward inside their own graph: its rate there (alone,
        # the engine may be host-bound at small batches where the graph is not)
        graphed = measure_captured(eng, **timing) if "graph" in spec.pipeline_modes else None
        others = graphed is None or set(spec.pipeline_modes) != {"graph"}
        model_only = measure_engine(eng, **timing).img_per_s if others else None
    except Exception as e:  # noqa: BLE001 - the engine cannot run here: error rows
        if eng is not None:
            eng.close()
        free_memory()
        return [{**r, **failure(e)} for r in rows]
    try:
        for r in rows:
            publish(engine=r["variant"])
            try:
                cfg = pipeline_config(r["streams"], r["pipeline_mode"], spec.pipeline_nms_topk)
                pipe = DetectionPipeline(model, eng, cfg)
                with phase("timed") as timed:
                    st = measure_pipeline(pipe, frames, head["batch"], spec.seconds)
                r["timed_s"] = timed.seconds
            except Exception as e:  # noqa: BLE001
                r.update(failure(e))
                free_memory()
                continue
            graph_row = r["pipeline_mode"] == "graph" and graphed is not None
            own = graphed.img_per_s if graph_row else model_only
            r.update(
                status="ok",
                message="",
                median_ms=st["latency_p50_ms"],
                p99_ms=st["latency_p99_ms"],
                img_per_s=st["frames_per_s"],
                build_s=build_s,
                model_only_img_per_s=own,
                pipeline_vs_model_only=st["frames_per_s"] / own,
                n_samples=st["frames"] // head["batch"],
                pinned=st["pinned"],
                candidates_per_frame=st["candidates_per_frame"],
                boxes_per_frame=st["boxes_per_frame"],
            )
    finally:
        eng.close()
    return rows


def _predict_row(model, head: dict, spec: BenchSpec, frames) -> dict:
    """ultralytics ``YOLO.predict`` on the same frames and weights (its own pre-processing,
    fp16 on a GPU, NMS and Results objects): wall clock per call of ``batch`` frames."""
    import copy

    import numpy as np

    row = {
        **head,
        "variant": PREDICT,
        "scope": "frames_to_boxes",
        "backend": "ultralytics",
        "compile_mode": "",
        "precision": "fp16" if spec.on_gpu else "fp32",
        "layout": "nchw",
    }
    try:
        from ultralytics import YOLO

        det = copy.deepcopy(model.det)
        det.model[-1].training = False
        yolo = YOLO("yolov8n.yaml", task="detect", verbose=False)
        yolo.model = det
        batch = head["batch"]
        batch_frames = [frames[i % len(frames)] for i in range(batch)]
        publish(engine=PREDICT, batch=batch)
        kw = dict(imgsz=spec.imgsz, device=spec.device, half=spec.on_gpu, verbose=False, rect=False)
        with phase("warmup") as warm:
            yolo.predict(batch_frames, **kw)  # warm-up (model set-up, cuDNN autotuning)
        lat, n, t0 = [], 0, time.perf_counter()
        while time.perf_counter() - t0 < spec.seconds or not lat:
            t = time.perf_counter()
            yolo.predict(batch_frames, **kw)
            lat.append(time.perf_counter() - t)
            n += batch
        wall = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001
        free_memory()
        return {**row, **failure(e)}
    return {
        **row,
        "status": "ok",
        "message": "",
        "median_ms": float(np.median(lat)) * 1e3,
        "p99_ms": float(np.quantile(lat, 0.99)) * 1e3,
        "img_per_s": n / wall,
        "n_samples": len(lat),
        "warmup_s": warm.seconds,
        "timed_s": wall,
    }


def bundled_frames():
    """The photos shipped with ultralytics as BGR frames of one shape (the first photo's; the
    others resized to it), as a camera would deliver them."""
    import cv2

    frames = [cv2.imread(str(p)) for p in bundled_images()]
    h, w = frames[0].shape[:2]
    return [f if f.shape[:2] == (h, w) else cv2.resize(f, (w, h)) for f in frames]

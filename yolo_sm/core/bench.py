"""Benchmark per (model, batch): the eager fp16 NHWC baseline and each engine in interleaved
rounds, the frames-to-boxes pipeline and ``YOLO.predict``; a failed variant is an error row."""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, replace

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import BenchStep
from yolo_sm.contract.workload import clear, publish
from yolo_sm.core.engines import build_engine, check_device
from yolo_sm.core.engines.config import Backend, Layout, Precision, check_compile_mode
from yolo_sm.core.grid import (
    Pace,
    free_memory,
    longest_by_width,
    pending,
    run_grid,
    table_rows,
    width_scaled,
)
from yolo_sm.core.images import bundled_images
from yolo_sm.core.models import FAMILIES, MAX_WIDTH, MIN_WIDTH, YoloForward, build_yolo, model_flops
from yolo_sm.core.models.spec import build_spec, parse_model, spec_scale
from yolo_sm.core.nms import nms_label
from yolo_sm.core.pipeline import (
    DetectionPipeline,
    PipelineConfig,
    measure_pipeline,
    set_class_prior,
    ultralytics_yolo,
)
from yolo_sm.core.provenance import stamp
from yolo_sm.core.stopwatch import phase
from yolo_sm.core.sweep import Point, SweepSpec, engine_config, failure, finish_point, open_point
from yolo_sm.core.timing import engine_call, measure_captured, measure_engine, measure_rounds

BASELINE = ("eager", "fp16", "nhwc")
ROUNDS = 5  # interleaved rounds of a unit's engines
# the paths a user would deploy besides eager (max-autotune builds for minutes); the pipeline
# wraps the compiled engine in one CUDA graph per batch in flight, with the fixed-size NMS
DEFAULT_ENGINES = (
    ("cudagraph", "fp16", "nhwc"),
    ("compile", "fp16", "nhwc"),
    ("compile:reduce-overhead", "fp16", "nhwc"),
)
PIPELINE_ENGINE = ("compile", "fp16", "nhwc")
# a CPU has no CUDA graph and emulates fp16 convolutions: its pipeline wraps eager fp32
CPU_PIPELINE_ENGINE = ("eager", "fp32", "nhwc")
PREDICT = "ultralytics_predict"
UNIT = ("family", "width", "batch")
# run_point's columns carried into engine rows
_POINT_COLUMNS = tuple(
    """status message median_ms iqr_ms p99_ms img_per_s n_samples noisy rel_err check_input tflops
    flops_per_img peak_mem_bytes build_s compile_s compile_first_s capture_s warmup_s
    warmup_settled timed_s profile_s compile_cache autotuned_ops autotune_reads host_cpu_ms
    launches_per_forward kernels_per_forward gpu_busy_ms host_launch_us gpu_busy_fraction
    host_bound quant_convs quant_fallbacks quant_handoffs quant_plans_cached rounds round_ms
    round_sm_clock_mhz round_spread_pct sm_clock_mhz""".split()
)


def variant_name(engine) -> str:
    """``backend[:mode]/precision/layout``."""
    return "/".join(engine)


def pipeline_variant(engine, streams: int, mode: str = "full") -> str:
    """``pipeline/<engine variant>[/<mode> unless full]/s<streams>``."""
    mid = "" if mode == "full" else f"/{mode}"
    return f"pipeline/{variant_name(engine)}{mid}/s{int(streams)}"


def parse_engine(item) -> tuple[str, str, str]:
    """``backend[:mode]/precision/layout`` (text or a 3-sequence) -> a checked triple."""
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
    """What to bench: (family, width) ``models``, ``engines`` besides the :data:`BASELINE`, a
    pipeline row per (mode, streams), ``seconds`` of each pipeline / predict row."""

    models: tuple = (("yolov8", 0.5),)
    batches: tuple = (1, 16, 64)
    engines: tuple = DEFAULT_ENGINES
    pipeline_engine: tuple = PIPELINE_ENGINE
    pipeline_streams: tuple = (1, 4)
    pipeline_modes: tuple = ("graph",)
    pipeline_nms_topk: int = 1024
    device: str = "cuda"
    imgsz: int = 640
    budget_ms: float = 300.0
    warmup_ms: float = 50.0
    seconds: float = 1.0
    predict: bool = True
    est_unit_s: float = 120.0  # a unit's guessed seconds before one was timed
    specs: tuple = ()  # (label, spec text) of the models given as a file

    @classmethod
    def from_mapping(cls, data: dict, where: str = "bench", *, flags: bool = False) -> BenchSpec:
        return cls.from_step(BenchStep.from_mapping(data, where, flags=flags))

    @classmethod
    def from_step(cls, step: BenchStep) -> BenchSpec:
        """The bench of a parsed step (a model file's width its own)."""
        if step.models and (step.family or step.widths):
            raise UserError("give bench models either as models or as family + widths")
        models, specs = [], []
        for item in step.models:
            m = parse_model(item, need_shape=False)
            if m.kind == "family":
                models.append((m.source, float(m.width)))
            else:
                models.append((m.name, spec_scale(m)[0]))
                specs.append((m.name, m.text))
        if not step.models and (step.family or step.widths):
            models = [(step.family or "yolov8", w) for w in step.widths or (1.0,)]
        kw = {f: getattr(step, f) for f in (
            "batches", "engines", "pipeline_streams", "pipeline_modes", "pipeline_nms_topk",
            "device", "imgsz", "budget_ms", "warmup_ms", "seconds", "predict", "est_unit_s",
        )}  # fmt: skip
        if models:
            kw.update(models=tuple(models), specs=tuple(specs))
        return cls(pipeline_engine=parse_engine(step.pipeline_engine), **kw).validated()

    def validated(self) -> BenchSpec:
        """Known families and widths checked; lists deduplicated, the baseline not twice."""
        for family, width in self.models:
            if family not in FAMILIES and family not in dict(self.specs):
                raise UserError(
                    f"bench runs YOLO detectors ({', '.join(FAMILIES)}), got family {family!r}"
                )
            if not MIN_WIDTH <= float(width) <= MAX_WIDTH:
                raise UserError(f"width must be between {MIN_WIDTH} and {MAX_WIDTH}, got {width}")
        engines = tuple(parse_engine(e) for e in self.engines)
        return replace(
            self,
            models=tuple((str(f), float(w)) for f, w in dict.fromkeys(self.models)),
            batches=tuple(dict.fromkeys(self.batches)),
            engines=tuple(e for e in dict.fromkeys(engines) if e != BASELINE),
            pipeline_streams=tuple(dict.fromkeys(self.pipeline_streams)),
            pipeline_modes=tuple(dict.fromkeys(self.pipeline_modes)),
        )

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    def pipeline_engine_here(self) -> tuple[str, str, str]:
        return self.pipeline_engine if self.on_gpu else CPU_PIPELINE_ENGINE

    def pipeline_rows(self) -> list[tuple[str, int]]:
        return [(m, s) for m in self.pipeline_modes for s in self.pipeline_streams]

    def units(self) -> list[tuple[str, float, int]]:
        """(family, width, batch), every batch of a model before the next."""
        return [(f, w, b) for f, w in self.models for b in self.batches]

    def variants(self) -> list[str]:
        out = [variant_name(e) for e in (BASELINE, *self.engines)]
        eng = self.pipeline_engine_here()
        out += [pipeline_variant(eng, s, m) for m, s in self.pipeline_rows()]
        return out + ([PREDICT] if self.predict else [])


def _unit_key(family, width, batch) -> tuple:
    return (str(family), round(float(width), 6), int(batch))


def _row_key(row: dict) -> tuple:
    return _unit_key(row["family"], row["width"], row["batch"])


def _complete(spec: BenchSpec):
    """Whether a unit's rows hold every variant of ``spec``."""
    want = set(spec.variants())
    return lambda unit, rows: want <= {r["variant"] for r in rows}


def missing_units(spec: BenchSpec, out) -> list[tuple[str, float, int]]:
    """The units of ``spec`` that ``out`` does not hold completely."""
    from pathlib import Path

    spec = spec.validated()
    rows = table_rows(Path(out), (*UNIT, "variant"), "bench")
    return pending(spec.units(), rows, lambda u: _unit_key(*u), _row_key, _complete(spec))


def _estimate(default: float, variants: int | None = None):
    """Seconds of the next unit: the longest timed unit of its family and batch (else batch),
    :func:`~yolo_sm.core.grid.width_scaled`, counted per variant; ``default`` before any."""

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
    """``rows`` with each ``unit_s`` scaled from its unit's number of variants to ``variants``."""
    unit = lambda r: (r.get("family"), r.get("width"), r.get("batch"))  # noqa: E731
    held: dict[tuple, set] = {}
    for r in rows:
        if r.get("variant") is not None:
            held.setdefault(unit(r), set()).add(r["variant"])
    out = []
    for r in rows:
        n, took = len(held.get(unit(r), ())), r.get("unit_s")
        out.append({**r, "unit_s": took * variants / n} if n and took is not None else r)
    return out


def run_bench(
    spec: BenchSpec,
    out=None,
    *,
    progress: bool = True,
    deadline: float | None = None,
    frames=None,
):
    """Bench every unit of ``spec`` that ``out`` lacks; the table, a row per (family, width,
    batch, variant). ``deadline``: a ``time.monotonic()``."""
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
        group=lambda u: u[:2],  # a model, built once
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


#: (p, spread) of :func:`~yolo_sm.core.pipeline.set_class_prior`: detections for NMS to work on
CLASS_PRIOR = (0.001, 1.5)


def bench_model(family: str, width: float, specs=()):
    """A YOLO detector with :data:`CLASS_PRIOR` (a model file of ``specs`` as it is), or the
    exception its build raised."""
    try:
        text = dict(specs).get(family)
        if text:
            model = build_spec(text)
            if not isinstance(model, YoloForward):
                raise UserError(f"bench runs YOLO detectors; {text} holds another model")
            return model
        model = build_yolo(family, width)
        set_class_prior(model, *CLASS_PRIOR)
        return model
    except Exception as e:  # noqa: BLE001 - a model that cannot be built becomes error rows
        return e


def bench_unit(model, family: str, width: float, batch: int, spec: BenchSpec, frames) -> list:
    """Rows of one (model, batch), ``vs_baseline`` against its baseline; ``model`` may be the
    exception its build raised (every variant an error row)."""
    head = {"family": family, "width": float(width), "batch": int(batch)}
    if isinstance(model, BaseException):
        rows = [{**head, "variant": v, "scope": _scope(v), **failure(model)}
                for v in spec.variants()]  # fmt: skip
    else:
        rows = _engine_rows(model, head, spec, model_flops(model, spec.imgsz))
        rows += _pipeline_rows(model, head, spec, frames)
        if spec.predict:
            rows.append(_predict_row(model, head, spec, frames))
    prov = stamp(spec.device)
    ok = [r for r in rows if r["variant"] == variant_name(BASELINE) and r["status"] == "ok"]
    for r in rows:
        img = r.get("img_per_s")
        r["vs_baseline"] = img / ok[0]["img_per_s"] if ok and img == img and img else None
        r.update({k: v for k, v in prov.items() if k not in r})
        r["model"] = dict(spec.specs).get(family, f"{family}:{float(width):g}")
    return rows


def _scope(variant: str) -> str:
    pipeline = variant.startswith("pipeline/") or variant == PREDICT
    return "frames_to_boxes" if pipeline else "model_only"


def _engine_columns(engine) -> dict:
    backend, _, mode = engine[0].partition(":")
    mode = (mode or "default") if backend == "compile" else ""
    return {"backend": backend, "compile_mode": mode, "precision": engine[1], "layout": engine[2]}


def _engine_rows(model, head: dict, spec: BenchSpec, flops: int) -> list[dict]:
    """The baseline and each engine of a unit, built then timed in :data:`ROUNDS` interleaved
    rounds; ``peak_mem_bytes``: one call's peak less what the other engines held (GPU)."""
    import torch

    engines = {variant_name(e): e for e in (BASELINE, *spec.engines)}
    sweep = SweepSpec(device=spec.device, budget_ms=spec.budget_ms, warmup_ms=spec.warmup_ms)
    points = {v: _point(head, e, spec) for v, e in engines.items()}
    on_gpu, held = spec.on_gpu, torch.cuda.memory_allocated if spec.on_gpu else (lambda: 0)
    rows, built, resident = {}, {}, {}
    try:
        for v, p in points.items():
            before = held()
            eng, rows[v] = open_point(model, p, sweep, flops)
            if eng is not None:
                built[v], resident[v] = eng, held() - before
        publish(engine="interleaved rounds")
        timed = measure_rounds(
            {v: engine_call(e) for v, e in built.items()}, batch=head["batch"],
            device=spec.device, warmup_ms=spec.warmup_ms, budget_ms=spec.budget_ms,
            rounds=ROUNDS,
        )  # fmt: skip
        for v, m in timed.items():
            try:
                if isinstance(m, BaseException):
                    raise m
                if on_gpu:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    engine_call(built[v])()
                    torch.cuda.synchronize()
                    others = sum(n for o, n in resident.items() if o != v)
                    rows[v]["peak_mem_bytes"] = torch.cuda.max_memory_allocated() - others
                rows[v] = finish_point(built[v], rows[v], m, points[v])
            except Exception as e:  # noqa: BLE001 - every failure is recorded
                rows[v] = {**rows[v], **failure(e)}
    finally:
        for eng in built.values():
            eng.close()
        built.clear()
        free_memory(collect=True)
    return [
        {**head, "variant": v, "scope": "model_only", **_engine_columns(e),
         **{k: rows[v].get(k) for k in _POINT_COLUMNS},
         **{k: x for k, x in rows[v].items() if k.startswith("prov_") and not isinstance(x, dict)}}
        for v, e in engines.items()
    ]  # fmt: skip


def _point(head: dict, engine, spec: BenchSpec) -> Point:
    cols = _engine_columns(engine)
    return Point(
        head["family"], "", head["width"], 0.33, 2048, cols["precision"], cols["layout"],
        cols["backend"], head["batch"], spec.imgsz, cols["compile_mode"] or "default",
        spec.device,
    )  # fmt: skip


def _pipeline_rows(model, head: dict, spec: BenchSpec, frames) -> list[dict]:
    """One engine, timed model-only, then wrapped in a pipeline per (mode, streams);
    ``pipeline_vs_model_only`` = pipeline frames/s over that img/s."""
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
            eng = build_engine(model, engine_config(_point(head, engine, spec)))
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
                topk = 0 if r["pipeline_mode"] == "full" else int(spec.pipeline_nms_topk)
                graph = r["pipeline_mode"] == "graph"
                cfg = PipelineConfig(streams=int(r["streams"]), nms_topk=topk, graph=graph)
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
    """ultralytics ``YOLO.predict`` on the same frames and weights (fp16 on a GPU): wall clock
    per call of ``batch`` frames."""
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
        yolo = ultralytics_yolo(model)
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
    """ultralytics' bundled photos as BGR frames of the first one's shape."""
    import cv2

    frames = [cv2.imread(str(p)) for p in bundled_images()]
    h, w = frames[0].shape[:2]
    return [f if f.shape[:2] == (h, w) else cv2.resize(f, (w, h)) for f in frames]

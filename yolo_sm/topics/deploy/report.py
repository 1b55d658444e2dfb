"""Figures of the fast-engines notebook (10): speed-up against width, frames to boxes."""

from __future__ import annotations

from yolo_sm.analyse.bench_table import complete_bench, engines, variant_order
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.hardware import ceiling
from yolo_sm.report import plots, tables
from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.sections import Note, missing_note, needs
from yolo_sm.report.style import finish
from yolo_sm.topics.deploy import analyse as fast
from yolo_sm.topics.deploy import compile_cache, frames
from yolo_sm.topics.deploy import recommend as fast_recommend


def plot_speedup_vs_width(bench, title: str | None = None):
    """Each engine's img/s over the baseline's against width, one panel per batch (model-only,
    the same unit of the run); the dotted line is the baseline."""
    import plotly.express as px

    e = engines(bench).sort_values("width")
    fig = px.line(
        e,
        x="width",
        y="vs_baseline",
        color="variant",
        facet_col="batch",
        markers=True,
        hover_data=[c for c in ("img_per_s", "median_ms", "build_s") if c in e],
        category_orders={
            "variant": [v for v in variant_order(bench) if v in set(e.variant)],
            "batch": sorted(e.batch.unique()),
        },
        template=TEMPLATE,
        title=title or "Speed-up over eager fp16 NHWC (img/s ratio, same run) vs width",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.for_each_annotation(lambda a: a.update(text=f"batch {a.text.split('=')[-1]}"))
    # one y range per batch: the batch-1 ratios would flatten the batch-64 gains on a shared axis
    fig.update_yaxes(matches=None, showticklabels=True, rangemode="tozero")
    fig.update_yaxes(title_text="speed-up over eager fp16 NHWC (img/s ratio)", col=1)
    fig.update_xaxes(title_text="width multiplier")
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return finish(fig)


def plot_pipeline(pipe, title: str | None = None):
    """Frames/s against width per batch: each pipeline row, its engine model-only and
    YOLO.predict (log scale)."""
    import pandas as pd
    import plotly.express as px

    first = pipe.drop_duplicates(["width", "batch"])
    long = pd.concat(
        [
            pipe.assign(what=pipe["streams"].map(lambda s: f"pipeline, {s:g} stream(s)"))[
                ["width", "batch", "what", "img_per_s"]
            ],
            first.assign(what="engine model-only", img_per_s=first["model_only_img_per_s"])[
                ["width", "batch", "what", "img_per_s"]
            ],
            first.assign(what="YOLO.predict", img_per_s=first["predict_img_per_s"])[
                ["width", "batch", "what", "img_per_s"]
            ],
        ],
        ignore_index=True,
    ).sort_values("width")
    fig = px.line(
        long,
        x="width",
        y="img_per_s",
        color="what",
        facet_col="batch",
        markers=True,
        log_y=True,
        template=TEMPLATE,
        title=title or "Frames to boxes: our pipeline vs its engine alone vs YOLO.predict",
    )
    fig.for_each_annotation(lambda a: a.update(text=f"batch {a.text.split('=')[-1]}"))
    fig.update_yaxes(title_text="frames per second", col=1)
    fig.update_xaxes(title_text="width multiplier")
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return finish(fig)


# ---- notebook 10's sections, each from the root ---------------------------------------------

BENCH = fast.BENCH
TRACE_FP8 = "trace_fp8_w1_b64"
TRACE_COMPILE = "trace_compile_w1_b64"
PROBE = frames.PROBE


@needs(BENCH)
def side_by_side(root: DataRoot):
    """The bench as one row per (batch, variant) and one column per width: img/s and, in
    brackets, the same-unit ratio to the baseline (failed variants are empty cells)."""
    t = fast.side_by_side(root.load(BENCH))
    ok = t[t.status == "ok"]
    cell = ok.img_per_s.map("{:,.0f}".format) + " (" + ok.vs_baseline.map("{:.2f}x".format) + ")"
    order = {v: i for i, v in enumerate(variant_order(t))}
    wide = ok.assign(cell=cell).pivot_table(
        index=["batch", "variant"], columns="width", values="cell", aggfunc="first"
    )
    wide = wide.sort_index(key=lambda s: s.map(order) if s.name == "variant" else s)
    wide.columns = [f"width {w:g}" for w in wide.columns]
    return tables.show(wide.fillna(""), index=True)


@needs(BENCH)
def units(root: DataRoot):
    """When each (width, batch) unit ran, and which pipeline it measured."""
    return tables.show(fast.units(root.load(BENCH)))


@needs(BENCH)
def speedup_figure(root: DataRoot):
    return plot_speedup_vs_width(
        root.load(BENCH),
        title=f"Speed-up over eager fp16 NHWC (img/s ratio, same run) vs width "
        f"({root.device_name()})",
    )


@needs(BENCH)
def failures(root: DataRoot):
    """The variants that did not run, and why."""
    return tables.show(fast.failures(root.load(BENCH)))


def pipeline(root: DataRoot, dataset: str = BENCH):
    """Frames to boxes in one bench (``dataset``): each pipeline row against its engine and
    YOLO.predict."""
    if not root.has(dataset):
        return missing_note(root, [dataset])
    return tables.show(frames.pipeline_table(root.load(dataset)))


def pipeline_figure(root: DataRoot, dataset: str = BENCH):
    if not root.has(dataset):
        return missing_note(root, [dataset])
    return plot_pipeline(
        frames.pipeline_table(root.load(dataset)),
        title=f"Frames to boxes ({dataset}): pipeline vs its engine alone vs YOLO.predict "
        f"({root.device_name()})",
    )


def pipeline_modes(root: DataRoot, dataset: str = "bench_pipeline"):
    """The best frames/s of each pipeline mode per unit of one bench, and each mode over the
    full-NMS pipeline (:func:`yolo_sm.topics.deploy.frames.mode_table`)."""
    if not root.has(dataset):
        return missing_note(root, [dataset])
    return tables.show(frames.mode_table(root.load(dataset)))


def probe(root: DataRoot):
    """Every pipeline probe of the root stage by stage, one block of rows per (width, batch)
    (:func:`yolo_sm.topics.deploy.frames.probe_stages`)."""
    names = root.find_all("probe")
    if not names:
        return missing_note(root, [PROBE])
    return tables.show(frames.probe_stages({n: root.load(n) for n in names}))


def _compiled(root: DataRoot):
    fp8 = root.load(TRACE_FP8)
    fp16 = fast.config_of(fp8.config.unique(), "fp16")
    both = fast.compare_backends({"eager": fp8, "compile": root.load(TRACE_COMPILE)}, fp16)
    return fast.time_breakdown(both), fp16


@needs(TRACE_FP8, TRACE_COMPILE)
def compile_breakdown(root: DataRoot):
    """GPU ms per forward by part, eager fp16 against torch.compile."""
    return tables.show(_compiled(root)[0])


def stacked_breakdown(breakdown, column: str, title: str):
    """A :func:`yolo_sm.topics.deploy.analyse.time_breakdown` as stacked bars, one per ``column``
    value."""
    parts = breakdown.drop("total").reset_index()
    parts = parts.melt(id_vars="part", var_name=column, value_name="ms_per_forward")
    return plots.plot_bars(
        parts, x=column, y="ms_per_forward", color="part", barmode="stack", title=title
    )


@needs(TRACE_FP8, TRACE_COMPILE)
def compile_figure(root: DataRoot):
    b, cfg = _compiled(root)
    return stacked_breakdown(
        b,
        "engine",
        f"GPU ms per forward by part, eager vs torch.compile, {cfg} ({root.device_name()}, Kineto)",
    )


@needs(TRACE_FP8)
def fp8_breakdown(root: DataRoot):
    """GPU ms per forward by part, eager fp16 against the fp8 engine."""
    return tables.show(fast.time_breakdown(root.load(TRACE_FP8)))


@needs(TRACE_FP8)
def fp8_figure(root: DataRoot):
    return stacked_breakdown(
        fast.time_breakdown(root.load(TRACE_FP8)),
        "config",
        f"GPU ms per forward by part, eager fp16 vs fp8 ({root.device_name()}, Kineto)",
    )


@needs(TRACE_FP8, BENCH)
def fp8_dates(root: DataRoot):
    """When the fp8 trace and the bench's fp8 rows were measured (UTC, first and last)."""
    import pandas as pd

    t = root.load(TRACE_FP8)
    b = root.load(BENCH)
    rows = [
        (TRACE_FP8, t[t.config.str.contains("_fp8_")].prov_date_utc),
        (BENCH, b[b.variant.str.contains("fp8")].prov_date_utc),
    ]
    return pd.DataFrame(
        [{"dataset": n, "first_utc": d.min(), "last_utc": d.max()} for n, d in rows]
    )


@needs(BENCH)
def recommendation(root: DataRoot):
    """What to deploy per batch regime
    (:func:`yolo_sm.topics.deploy.recommend.recommend_by_batch`), over the units that hold every
    engine of their plan step (:func:`yolo_sm.analyse.bench_table.complete_bench`)."""
    rec = fast_recommend.recommend(complete_bench(root, BENCH))
    return tables.show(fast_recommend.recommend_by_batch(rec))


def roofs(root: DataRoot) -> dict:
    """The measured dense matmul peak of each precision the fast-engines bench ran an engine
    in, where ``root``'s ceilings hold it (``matmul_<precision>``): precision -> (TFLOP/s,
    where it comes from)."""
    precisions = sorted(set(engines(root.load(BENCH), baseline=True).get("precision", [])))
    found = {p: ceiling(root, f"matmul_{p}") for p in precisions}
    return {p: v for p, v in found.items() if v is not None}


@needs(BENCH)
def ranking(root: DataRoot):
    """Every engine ranked per batch regime (:func:`yolo_sm.topics.deploy.recommend.ranking`),
    over the units that hold every engine of their plan step, each engine's TFLOP/s against
    the measured matmul peak of its precision."""
    peaks = {p: v[0] for p, v in roofs(root).items()}
    return tables.show(fast_recommend.engine_ranking(complete_bench(root, BENCH), peaks))


@needs(BENCH)
def roof_note(root: DataRoot) -> Note:
    """Which measured peaks ``roof_pct`` reads, or that the root has none."""
    found = roofs(root)
    if not found:
        return Note(f"{root.name} holds no measured matmul peak (`ceilings`): `roof_pct` is empty.")
    return Note(
        "`roof_pct` is the engine's TFLOP/s (the model's FLOPs per image x batch / latency) "
        "over the dense matmul peak of its precision measured on this machine: "
        + "; ".join(f"{p} {v:,.0f} TFLOP/s ({src})" for p, (v, src) in found.items())
        + ". A convolutional detector also waits on memory and launches, so the matmul peak "
        "is the roof it cannot pass, not a speed it should reach."
    )


@needs(BENCH)
def recommendation_detail(root: DataRoot):
    """:func:`yolo_sm.topics.deploy.recommend.recommend` per (batch, width) unit that holds
    every engine of its plan step."""
    rec = fast_recommend.recommend(complete_bench(root, BENCH)).drop(columns=["regime", "caveats"])
    return tables.show(rec)


@needs(BENCH)
def workload_note(root: DataRoot):
    """The workload caveat (random weights: post-processing load), from the bench."""
    return Note(fast_recommend.workload_sentence(root.load(BENCH)))


@needs(compile_cache.DATASET)
def compile_builds(root: DataRoot):
    """The cold and the warm torch.compile build of each mode, side by side
    (:func:`yolo_sm.topics.deploy.compile_cache.builds`)."""
    return tables.show(compile_cache.builds(root.load(compile_cache.DATASET)))


@needs(fast.AUTOTUNE_DATASET)
def autotune_runs(root: DataRoot):
    """The autotune bench: per width, every engine in run order with its img/s, ratio to the
    eager baseline of the same process, latency and build seconds (max-autotune's include its
    autotuning), what the build found in inductor's cache and, for max-autotune, the ops it
    autotuned afresh and the autotunings it read from disk; a failed engine's row says why."""
    extra = ("compile_cache", "autotuned_ops", "autotune_reads", "message")
    side = fast.side_by_side(root.load(fast.AUTOTUNE_DATASET), extra)
    return tables.show(side.drop(columns=["family", "scope"], errors="ignore"))

"""Figures of the fast-engines notebook (10): speed-up against width, frames to boxes."""

from __future__ import annotations

from yolo_sm.analyse import collection_time as collection
from yolo_sm.analyse import compile_cache, fast, fast_recommend, frames
from yolo_sm.analyse import eight_bit_goal as goal8
from yolo_sm.analyse import precision_8bit as p8
from yolo_sm.analyse.bench_table import (
    complete_bench,
    engines,
    incomplete_units,
    planned_engines,
    variant_order,
)
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.schema import COLLECTION_TIME
from yolo_sm.report import plots, tables
from yolo_sm.report.colors import TEMPLATE, color_map
from yolo_sm.report.goals import PIPELINE_OVER_FASTEST
from yolo_sm.report.sections import Note, missing_note, needs
from yolo_sm.report.style import finish
from yolo_sm.report.text import code


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
    full-NMS pipeline (:func:`yolo_sm.analyse.frames.mode_table`)."""
    if not root.has(dataset):
        return missing_note(root, [dataset])
    return tables.show(frames.mode_table(root.load(dataset)))


def probe(root: DataRoot):
    """Every pipeline probe of the root stage by stage, one block of rows per (width, batch)
    (:func:`yolo_sm.analyse.frames.probe_stages`)."""
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
    """A :func:`yolo_sm.analyse.fast.time_breakdown` as stacked bars, one per ``column`` value."""
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
    (:func:`yolo_sm.analyse.fast_recommend.recommend_by_batch`), over the units that hold every
    engine of their plan step (:func:`yolo_sm.analyse.bench_table.complete_bench`)."""
    rec = fast_recommend.recommend(complete_bench(root, BENCH))
    return tables.show(fast_recommend.recommend_by_batch(rec))


@needs(BENCH)
def recommendation_detail(root: DataRoot):
    """:func:`yolo_sm.analyse.fast_recommend.recommend` per (batch, width) unit that holds
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
    (:func:`yolo_sm.analyse.compile_cache.builds`)."""
    return tables.show(compile_cache.builds(root.load(compile_cache.DATASET)))


#: the columns of one snapshot shown per step
COLLECTION_COLUMNS = (
    "step", "kind", "state", "spent_s", "spent_source", "left_s", "left_source", "plan_s",
    "superseded_s",
)  # fmt: skip


def no_snapshot(root: DataRoot) -> Note:
    """The one line a root without a collection_time snapshot shows."""
    return Note(
        f"The root {code(root.name)} holds no {code(COLLECTION_TIME)} snapshot: `yolo-sm collect "
        "--plan PLAN --out ROOT --status --save` writes it from the root's manifest and tables "
        "(no GPU needed)."
    )


def collection_steps(root: DataRoot, baseline: DataRoot | None = None):
    """Per plan step the GPU seconds of ``root``'s collection_time snapshot (spent, left and
    their sum); with a ``baseline`` root that has one too, both side by side with the ratio
    (:func:`yolo_sm.analyse.collection_time.side_by_side`)."""
    snap = collection.snapshot(root)
    if snap is None:
        return no_snapshot(root)
    base = collection.snapshot(baseline) if baseline is not None else None
    if base is None or baseline.path.resolve() == root.path.resolve():
        # a snapshot saved before superseded_s was a column shows the others
        return tables.show(snap[[c for c in COLLECTION_COLUMNS if c in snap]])
    return tables.show(collection.side_by_side(base, snap))


def warmer_builds(root: DataRoot, baseline: DataRoot | None = None):
    """Per bench and sweep step, the torch.compile builds ``root`` and ``baseline`` both made
    and those where ``root``'s found more in inductor's disk cache
    (:func:`yolo_sm.analyse.collection_time.warmer_builds`); a note without a baseline, or
    where the two made no compiled build in common."""
    return _against(root, baseline, collection.warmer_builds, "made no torch.compile build "
                    "of the same engine and unit")  # fmt: skip


def same_units(root: DataRoot, baseline: DataRoot | None = None):
    """Per bench and sweep step, the seconds ``root`` and ``baseline`` took for the units both
    measured (:func:`yolo_sm.analyse.collection_time.same_units`); a note without a baseline,
    or where the two hold no unit in common."""
    return _against(root, baseline, collection.same_units, "hold no bench or sweep unit in "
                    "common")  # fmt: skip


def _against(root: DataRoot, baseline: DataRoot | None, compare, none: str):
    """``compare(baseline, root)`` as a table; a note without another root as ``baseline``, or
    where the table is empty (the two roots ``none``)."""
    if baseline is None or baseline.path.resolve() == root.path.resolve():
        return Note("Set `BASELINE` to another root with a snapshot to compare the two.")
    table = compare(baseline, root)
    if not len(table):
        return Note(
            f"The roots {code(baseline.name)} and {code(root.name)} {none} (or one lacks a "
            "snapshot)."
        )
    return tables.show(table)


def collection_builds(root: DataRoot):
    """Where the build seconds of the root's bench and sweep tables go, per engine kind
    (:func:`yolo_sm.analyse.collection_time.build_by_engine`)."""
    return tables.show(collection.build_by_engine(root))


def collection_phases(root: DataRoot):
    """Where the recorded collection seconds went, per phase
    (:func:`yolo_sm.analyse.collection_time.phases`); None without a snapshot (the section's
    first cell says so)."""
    snap = collection.snapshot(root)
    return None if snap is None else tables.show(collection.phases(snap))


def pipeline_gap(root: DataRoot):
    """Speed goal 1's ratio per unit as its two factors, for the fastest pipeline of the unit
    among the benches that ran one: the pipeline over the engine it wraps, that engine over
    the fastest (:func:`yolo_sm.analyse.frames.fastest_pipelines`); and in ms per batch what
    the stages around the engine cost against what the goal leaves them
    (:func:`yolo_sm.analyse.frames.stage_budget`)."""
    benches = {d: complete_bench(root, d) for d in frames.PIPELINE_DATASETS if root.has(d)}
    if not benches:
        return missing_note(root, frames.PIPELINE_DATASETS)
    gap = frames.stage_budget(frames.fastest_pipelines(benches), PIPELINE_OVER_FASTEST)
    # the engine it wraps is named in the pipeline variant: one column fewer on the page
    return tables.show(gap.drop(columns="own_engine"))


@needs(p8.BENCH_8BIT)
def eight_bit_budget(root: DataRoot):
    """Speed goal 2 in ms per forward, per width the 8-bit bench timed and whose fastest int8
    engine an int8 trace holds: the time a forward at the goal's ratio to the fastest fp16
    engine may take, that engine's convolutions and its kernels outside them against it
    (:func:`yolo_sm.analyse.eight_bit_goal.budget_table`)."""
    if not any(root.has(t) for t in goal8.INT8_TRACES):
        return missing_note(root, list(goal8.INT8_TRACES))
    return tables.show(goal8.budget_of(root))


def incomplete(root: DataRoot, dataset: str):
    """The (width, batch) units of bench ``dataset`` that lack an engine its plan step names,
    and which (:func:`yolo_sm.analyse.bench_table.incomplete_units`): no goal on the fastest
    engine is decided there until the unit is measured again."""
    if not root.has(dataset):
        return missing_note(root, [dataset])
    gaps = incomplete_units(root.load(dataset), planned_engines(root, dataset))
    if gaps.empty:
        return Note(f"Every unit of {code(dataset)} holds every engine its plan step names.")
    return tables.show(gaps)


def eight_bit_incomplete(root: DataRoot):
    """:func:`incomplete` for the 8-bit bench (speed goal 2)."""
    return incomplete(root, goal8.BENCH_8BIT)


def autotune_incomplete(root: DataRoot):
    """:func:`incomplete` for the bench beside max-autotune (speed goal 3)."""
    return incomplete(root, fast.AUTOTUNE_DATASET)


@needs(fast.AUTOTUNE_DATASET)
def autotune_runs(root: DataRoot):
    """Speed goal 3's runs: per width, every engine of the autotune bench in run order with
    its img/s, ratio to the eager baseline of the same process, latency and build seconds
    (max-autotune's include its autotuning), what the build found in inductor's cache and, for
    max-autotune, the ops it autotuned afresh and the autotunings it read from disk; a failed
    engine's row says why."""
    extra = ("compile_cache", "autotuned_ops", "autotune_reads", "message")
    side = fast.side_by_side(root.load(fast.AUTOTUNE_DATASET), extra)
    return tables.show(side.drop(columns=["family", "scope"], errors="ignore"))


def plot_collection(parts_table, *, title=None):
    """Each plan step's GPU seconds as a horizontal bar, stacked by part (spent and recorded,
    spent and estimated, left), steps in plan order from the top
    (:func:`yolo_sm.analyse.collection_time.parts`)."""
    import plotly.express as px

    steps = list(dict.fromkeys(parts_table["step"]))
    fig = px.bar(
        parts_table,
        x="seconds",
        y="step",
        color="part",
        orientation="h",
        category_orders={"step": steps, "part": list(collection.PARTS)},
        color_discrete_map=color_map(collection.PARTS),
        template=TEMPLATE,
        height=160 + 18 * len(steps),
        title=title or "GPU seconds of each plan step: spent and left",
    )
    fig.update_xaxes(title_text="GPU seconds")
    fig.update_yaxes(title_text="plan step")
    return finish(fig)


def collection_figure(root: DataRoot):
    """:func:`plot_collection` of ``root``'s snapshot; None without one (the section's first
    cell says so)."""
    snap = collection.snapshot(root)
    return None if snap is None else plot_collection(collection.parts(snap))

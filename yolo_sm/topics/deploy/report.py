"""Figures and sections of notebook 10: speed-up against width, frames to boxes."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.bench_table import complete_bench, engines, variant_order
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.hardware import ceiling
from yolo_sm.report import plots, tables
from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.rules import evaluate, topic_rules
from yolo_sm.report.sections import Note, missing_note, needs, section
from yolo_sm.report.style import finish
from yolo_sm.topics.deploy import analyse as fast
from yolo_sm.topics.deploy import frames
from yolo_sm.topics.deploy import recommend as fast_recommend


def _per_batch(fig, y_title: str):
    """A figure with one panel per batch: panel titles, axis titles, legend below."""
    fig.for_each_annotation(lambda a: a.update(text=f"batch {a.text.split('=')[-1]}"))
    fig.update_yaxes(title_text=y_title, col=1)
    fig.update_xaxes(title_text="width multiplier")
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return finish(fig)


def plot_speedup_vs_width(bench, title: str | None = None):
    """Each engine's img/s over the baseline's against width, one panel per batch (model-only,
    the same unit of the run); the dotted line is the baseline."""
    import plotly.express as px

    e = engines(bench).sort_values("width")
    order = {"variant": [v for v in variant_order(bench) if v in set(e.variant)]}
    fig = px.line(
        e, x="width", y="vs_baseline", color="variant", facet_col="batch", markers=True,
        hover_data=[c for c in ("img_per_s", "median_ms", "build_s") if c in e],
        category_orders={**order, "batch": sorted(e.batch.unique())}, template=TEMPLATE,
        title=title or "Speed-up over eager fp16 NHWC (img/s ratio, same run) vs width",
    )  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dot")
    # one y range per batch: the batch-1 ratios would flatten the batch-64 gains on a shared axis
    fig.update_yaxes(matches=None, showticklabels=True, rangemode="tozero")
    return _per_batch(fig, "speed-up over eager fp16 NHWC (img/s ratio)")


def plot_pipeline(pipe, title: str | None = None):
    """Frames/s against width per batch: each pipeline row, its engine model-only and
    YOLO.predict (log scale)."""
    import plotly.express as px

    first = pipe.drop_duplicates(["width", "batch"])
    long = pd.concat(
        [
            pipe.assign(what=pipe["variant"]),
            first.assign(what="engine model-only", img_per_s=first["model_only_img_per_s"]),
            first.assign(what="YOLO.predict", img_per_s=first["predict_img_per_s"]),
        ]
    )[["width", "batch", "what", "img_per_s"]].sort_values("width")
    fig = px.line(
        long, x="width", y="img_per_s", color="what", facet_col="batch", markers=True,
        log_y=True, template=TEMPLATE,
        title=title or "Frames to boxes: our pipeline vs its engine alone vs YOLO.predict",
    )  # fmt: skip
    return _per_batch(fig, "frames per second")


BENCH = fast.BENCH


def roofs(root: DataRoot, bench=None) -> dict:
    """precision -> (TFLOP/s, source): the measured dense matmul peak of each precision
    ``bench`` (default: the deploy bench) ran, where ``root``'s ceilings hold it."""
    bench = fast.deploy_bench(root) if bench is None else bench
    found = {
        p: ceiling(root, f"matmul_{p}") for p in set(bench.get("precision", pd.Series()).dropna())
    }
    return {p: v for p, v in sorted(found.items()) if v is not None}


def _ranked(root: DataRoot):
    return fast_recommend.ranking(
        fast.deploy_bench(root), {p: v[0] for p, v in roofs(root).items()}
    )


@needs(*fast.DEPLOY_BENCHES, any_of=True)
def answer(root: DataRoot):
    """What to deploy per batch regime, one line each (``recommend.deploy``)."""
    rows = fast_recommend.deploy(_ranked(root)).iterrows()
    return Note("\n".join(f"- {fast_recommend.deploy_line(r)}" for _, r in rows))


@needs(*fast.DEPLOY_BENCHES, any_of=True)
def ranking(root: DataRoot):
    """Every path ranked per batch regime, with its share of the measured matmul roof."""
    return tables.show(_ranked(root))


def roof_note(root: DataRoot) -> Note:
    """Which measured peaks ``roof_pct`` reads, and the benches the ranking read."""
    bench = fast.deploy_bench(root)
    by = bench.groupby("dataset").batch.unique() if len(bench) else {}
    read = ", ".join(f"`{d}` (batch {', '.join(map(str, sorted(b)))})" for d, b in by.items())
    found = roofs(root)
    peaks = "; ".join(f"{p} {v:,.0f} TFLOP/s ({src})" for p, (v, src) in found.items())
    roof = (
        f"`roof_pct` is the path's TFLOP/s over the dense matmul peak of its precision measured "
        f"on this machine ({peaks}): a roof a detector cannot pass, not a speed it should reach."
        if found
        else f"{root.name} holds no measured matmul peak (`ceilings`): `roof_pct` is empty."
    )
    return Note(f"The ranking reads {read or 'no bench'}. {roof}")


@needs(fast.COPYFREE)
def hardware(root: DataRoot):
    """Each engine of the copy-free bench per (width, batch), fastest first, with its share of
    the measured matmul roof of its precision."""
    bench = complete_bench(root, fast.COPYFREE)
    peaks = {p: v[0] for p, v in roofs(root, bench).items()}
    return tables.show(fast.roof_shares(bench, peaks))


@needs(fast.COPYFREE_TRACES["copy-free"])
def copyfree_figure(root: DataRoot):
    return _engines_figure(root, fast.copyfree_traces, "copy-free vs one CUDA graph")


def workload_note(root: DataRoot) -> Note:
    return Note(fast_recommend.workload_sentence(fast.deploy_bench(root)))


@needs(*fast.DEPLOY_BENCHES, any_of=True)
def side_by_side(root: DataRoot):
    """The deploy benches as one row per (batch, variant) and one column per width: img/s and,
    in brackets, the same-unit ratio to the eager baseline."""
    t = fast.side_by_side(fast.deploy_bench(root))
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
def speedup_figure(root: DataRoot):
    return plot_speedup_vs_width(
        root.load(BENCH),
        title=f"Speed-up over eager fp16 NHWC (img/s ratio, same run) vs width "
        f"({root.device_name()})",
    )


@needs(*fast.DEPLOY_BENCHES, any_of=True)
def failures(root: DataRoot):
    """The variants that did not run, and why."""
    return tables.show(fast.failures(fast.deploy_bench(root)))


def pipeline(root: DataRoot, dataset: str = BENCH):
    """Frames to boxes in one bench: each pipeline row against its engine and YOLO.predict."""
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
    """The best frames/s of each pipeline mode per unit, and each mode over the full NMS."""
    if not root.has(dataset):
        return missing_note(root, [dataset])
    return tables.show(frames.mode_table(root.load(dataset)))


def probe(root: DataRoot):
    """Every pipeline probe of the root stage by stage, one block per (width, batch)."""
    names = root.find_all("probe")
    if not names:
        return missing_note(root, [frames.PROBE])
    return tables.show(frames.probe_stages({n: root.load(n) for n in names}))


def stacked_breakdown(breakdown, column: str, title: str):
    """A :func:`~yolo_sm.topics.deploy.analyse.time_breakdown` as stacked bars, one per
    ``column`` value."""
    parts = breakdown.drop("total").reset_index()
    parts = parts.melt(id_vars="part", var_name=column, value_name="ms_per_forward")
    return plots.plot_bars(
        parts, x=column, y="ms_per_forward", color="part", barmode="stack", title=title
    )


@needs(fast.TRACE_FP8, fast.TRACE_COMPILE)
def compile_breakdown(root: DataRoot):
    """GPU ms per forward by part, eager fp16 against torch.compile, with kernels per forward."""
    both, _ = fast.compiled(root)
    t = fast.time_breakdown(both)
    t.loc["kernels per forward"] = fast.kernels_per_forward(both)
    return tables.show(t)


@needs(fast.TRACE_FP8, fast.TRACE_COMPILE)
def compile_figure(root: DataRoot):
    return _engines_figure(root, fast.compiled, "eager vs torch.compile")


def _engines_figure(root: DataRoot, traces, what: str):
    """Stacked GPU ms per forward by part of the engines ``traces(root)`` holds side by side."""
    both, cfg = traces(root)
    title = f"GPU ms per forward by part, {what}, {cfg} ({root.device_name()}, Kineto)"
    return stacked_breakdown(fast.time_breakdown(both), "engine", title)


compile_builds = section(fast.CACHE_DATASET, fast.cache_builds, tables.show)


@needs(fast.AUTOTUNE_DATASET)
def autotune_runs(root: DataRoot):
    """The autotune bench: per width every engine in run order with its img/s, ratio to eager,
    latency, build seconds and what the build found in inductor's cache."""
    extra = ("compile_cache", "autotuned_ops", "autotune_reads", "message")
    return tables.show(fast.side_by_side(root.load(fast.AUTOTUNE_DATASET), extra))


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The verdict table of the topic's rules for ``root``."""
    return evaluate(topic_rules("deploy"), fast.facts(root), root.name)

"""Notebook 03's section on collecting with several GPUs of one host: a multi-GPU root against a
one-GPU root of the same plan steps (:mod:`yolo_sm.topics.batch.multi_gpu`). Each function takes
the two roots (either may be None) and returns a table, a figure or one line saying what is
missing."""

from __future__ import annotations

import functools

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.schema import COLLECT_TASKS
from yolo_sm.report import rules, tables
from yolo_sm.report.sections import Note
from yolo_sm.report.style import finish
from yolo_sm.report.text import code
from yolo_sm.topics.batch import multi_gpu
from yolo_sm.topics.batch import multi_gpu_rules as findings


def missing(multi: DataRoot | None, single: DataRoot | None) -> Note | None:
    """The line the section shows instead of its tables, or None when both roots are there
    and ``multi`` was collected on two GPUs or more."""
    if multi is None or single is None:
        return Note(
            "A root collected with `yolo-sm collect --workers N` on N GPUs of one host "
            "(`MULTI_GPU`) beside the same plan steps on one of its GPUs (`ONE_GPU`) would show "
            "here how much sooner N GPUs finish, whether they measure alike and whether the "
            "merged tables hold the one-GPU rows."
        )
    if multi_gpu.workers(multi) < 2:
        return Note(
            f"The root {code(multi.name)} holds no {code(COLLECT_TASKS)} task log of a run on "
            "two GPUs or more: collect it with `--workers N`."
        )
    return None


def _needs_both(fn):
    """Decorator: ``fn(multi, single)`` runs only where :func:`missing` has nothing to say;
    otherwise it returns that line."""

    @functools.wraps(fn)
    def inner(multi: DataRoot | None, single: DataRoot | None):
        note = missing(multi, single)
        return note if note is not None else fn(multi, single)

    return inner


@_needs_both
def scaling(multi: DataRoot, single: DataRoot):
    """Wall time on N GPUs against one, speed-up, scaling efficiency and how busy the GPUs
    were (:func:`yolo_sm.topics.batch.multi_gpu.scaling`)."""
    if not single.has(COLLECT_TASKS):
        return Note(f"The root {code(single.name)} holds no {code(COLLECT_TASKS)} task log: "
                    "collect it with `--workers 1` to time it.")  # fmt: skip
    return tables.show(multi_gpu.scaling(multi.load(COLLECT_TASKS), single.load(COLLECT_TASKS)))


@_needs_both
def runs(multi: DataRoot, single: DataRoot):
    """Each root's runs (a resumed collection has several), from their task logs."""
    import pandas as pd

    parts = [
        multi_gpu.runs(r.load(COLLECT_TASKS)).assign(root=r.name)
        for r in (multi, single)
        if r.has(COLLECT_TASKS)
    ]
    d = pd.concat(parts, ignore_index=True)
    return tables.show(d[["root", *multi_gpu.RUN_COLUMNS]])


@_needs_both
def spread(multi: DataRoot, single: DataRoot):
    """Per GPU of the multi-GPU root: its points' median ratio to the one-GPU root and the
    ratio's spread (:func:`yolo_sm.topics.batch.multi_gpu.gpu_spread`)."""
    return tables.show(multi_gpu.gpu_spread(multi_gpu.all_ratios(multi, single)))


@_needs_both
def spread_figure(multi: DataRoot, single: DataRoot):
    """Every point's ratio (multi-GPU root over one-GPU root), one box per GPU that measured
    it in the multi-GPU root, coloured by dataset."""
    import plotly.express as px

    r = multi_gpu.all_ratios(multi, single).dropna(subset=["ratio"])
    if r.empty:
        return Note(f"The roots {code(multi.name)} and {code(single.name)} share no point.")
    r = r.assign(gpu=r.gpu_index.map(lambda i: f"GPU {int(i)}" if i == i else "?"))
    fig = px.box(
        r.sort_values("gpu_index"),
        x="gpu",
        y="ratio",
        color="dataset",
        points="all",
        hover_data=["gpu_uuid"],
        title=f"The same points on each GPU of {multi.name} over one GPU ({single.name})",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_yaxes(title_text="ratio to the one-GPU run (above 1: faster)")
    fig.update_xaxes(title_text="GPU of the multi-GPU run (nvidia-smi index)")
    return finish(fig)


@_needs_both
def tables_match(multi: DataRoot, single: DataRoot):
    """Per table both roots hold: rows, rows only one holds, rows whose status differs
    (:func:`yolo_sm.topics.batch.multi_gpu.tables_match`)."""
    match = multi_gpu.tables_match(multi, single)
    if match.empty:
        return Note(
            f"The roots {code(multi.name)} and {code(single.name)} hold no table in common."
        )
    return tables.show(match)


def section(multi: DataRoot | None, single: DataRoot | None) -> list:
    """The section's outputs in order: the one line of :func:`missing` where it has one, else
    the scaling and runs tables, the spread figure and table, the tables' match and the
    findings' verdict table."""
    note = missing(multi, single)
    if note is not None:
        return [note]
    shown = [f(multi, single) for f in (scaling, runs, spread_figure, spread, tables_match)]
    return [*shown, rules.table(findings.verdicts(multi, single))]

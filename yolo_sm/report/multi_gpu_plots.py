"""Notebook 03's section on collecting with several GPUs of one host: a multi-GPU root against a
one-GPU root of the same plan steps (:mod:`yolo_sm.analyse.multi_gpu`). Each function takes
the two roots (either may be None) and returns a table, a figure or one line saying what is
missing."""

from __future__ import annotations

from yolo_sm.analyse import multi_gpu
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.schema import COLLECT_TASKS
from yolo_sm.report import tables
from yolo_sm.report.sections import Note
from yolo_sm.report.style import finish
from yolo_sm.report.text import code


def missing(multi: DataRoot | None, single: DataRoot | None) -> Note | None:
    """The line the section shows instead of its tables, or None when both roots are there
    and ``multi`` was collected on two GPUs or more."""
    if multi is None or single is None:
        return Note(
            "Set `MULTI_GPU` to a root collected with `yolo-sm collect --workers N` on a host "
            "with N GPUs and `ONE_GPU` to the same plan steps collected on one GPU of that host "
            "(`--workers 1`): this section compares the two."
        )
    if multi_gpu.workers(multi) < 2:
        return Note(
            f"The root {code(multi.name)} holds no {code(COLLECT_TASKS)} task log of a run on "
            "two GPUs or more: collect it with `--workers N`."
        )
    return None


def scaling(multi: DataRoot | None, single: DataRoot | None):
    """Wall time on N GPUs against one, speed-up, scaling efficiency and how busy the GPUs
    were (:func:`yolo_sm.analyse.multi_gpu.scaling`), then each root's runs."""
    note = missing(multi, single)
    if note is not None:
        return note
    m, s = (r.load(COLLECT_TASKS) if r.has(COLLECT_TASKS) else None for r in (multi, single))
    if s is None:
        return Note(f"The root {code(single.name)} holds no {code(COLLECT_TASKS)} task log: "
                    "collect it with `--workers 1` to time it.")  # fmt: skip
    return tables.show(multi_gpu.scaling(m, s))


def runs(multi: DataRoot | None, single: DataRoot | None):
    """Each root's runs (a resumed collection has several), from their task logs."""
    note = missing(multi, single)
    if note is not None:
        return note
    import pandas as pd

    parts = [
        multi_gpu.runs(r.load(COLLECT_TASKS)).assign(root=r.name)
        for r in (multi, single)
        if r.has(COLLECT_TASKS)
    ]
    d = pd.concat(parts, ignore_index=True)
    return tables.show(d[["root", *multi_gpu.RUN_COLUMNS]])


def spread(multi: DataRoot | None, single: DataRoot | None):
    """Per GPU of the multi-GPU root: its points' median ratio to the one-GPU root and the
    ratio's spread (:func:`yolo_sm.analyse.multi_gpu.gpu_spread`)."""
    note = missing(multi, single)
    if note is not None:
        return note
    return tables.show(multi_gpu.gpu_spread(multi_gpu.all_ratios(multi, single)))


def spread_figure(multi: DataRoot | None, single: DataRoot | None):
    """Every point's ratio (multi-GPU root over one-GPU root), one box per GPU that measured
    it in the multi-GPU root, coloured by dataset."""
    note = missing(multi, single)
    if note is not None:
        return note
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


def tables_match(multi: DataRoot | None, single: DataRoot | None):
    """Per table both roots hold: rows, rows only one holds, rows whose status differs
    (:func:`yolo_sm.analyse.multi_gpu.tables_match`)."""
    note = missing(multi, single)
    if note is not None:
        return note
    match = multi_gpu.tables_match(multi, single)
    if match.empty:
        return Note(
            f"The roots {code(multi.name)} and {code(single.name)} hold no table in common."
        )
    return tables.show(match)

"""One resumable runner for every grid of measurements (sweep points, bench units, re-measured
points).

:func:`run_grid` walks a list of units in order. A unit whose key the output table already
holds (completely, where ``complete`` says what that means) is skipped; consecutive units of
one ``group`` (a model: its precisions, layouts, backends and batches) run in one process, the
group's shared state (the built model) opened once; a group starts only if all its units fit
before the ``deadline`` at the estimated pace, so that what is compared is measured side by
side; after every unit the whole table is written atomically (temporary file + rename), so a
run killed at any moment leaves a readable table lacking at most the unit in progress; GPU
memory is freed between groups. Rerunning the same call continues where the last one stopped.
"""

from __future__ import annotations

import gc
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import SCHEMAS, wrong_types
from yolo_sm.contract.scrub import user_argv
from yolo_sm.contract.store import (
    check_output_path,
    output_lock,
    read_metadata,
    read_table,
    remove_stale_partials,
    write_atomic,
)
from yolo_sm.core.provenance import gpu_clash, gpu_name

# --- memory ---------------------------------------------------------------------------------


def free_memory(collect: bool = True) -> None:
    """Release cached GPU memory; a full ``gc.collect`` (slow on big heaps) only when asked:
    after a failure (an OOM leaves reference cycles through the traceback) or a model change."""
    import torch

    if collect:
        gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --- the runner -----------------------------------------------------------------------------


@dataclass
class Pace:
    """What a run knows when it estimates the next unit: every row of the table so far (those
    read from ``out`` included) and the seconds each unit measured in this run took."""

    rows: list[dict] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


#: the range of the power of the width a unit's seconds grow with (:func:`width_scaled`): the
#: upper bound where only one width was measured (a convolution's work grows with the square of
#: the width), else the power fitted through the nearest measured width and the next narrower
#: one, bounded to this range (compile and tuning times grow less than the work, which a fit
#: sees)
WIDTH_POWER = (1.0, 2.0)


def longest_by_width(rows, keep: Callable[[dict], bool]) -> dict[float, float]:
    """Width -> the longest ``unit_s`` (the seconds a row's unit took) among the ``rows`` that
    ``keep`` accepts and that recorded one: what :func:`width_scaled` scales from."""
    seen: dict[float, float] = {}
    for r in rows:
        took = r.get("unit_s")
        if took is not None and math.isfinite(took) and keep(r):
            seen[r["width"]] = max(seen.get(r["width"], 0.0), float(took))
    return seen


def width_scaled(seen: dict[float, float], width: float) -> float | None:
    """Seconds a unit of ``width`` will take, from ``seen`` (width -> the longest seconds a
    unit like it took at that width): those of the nearest measured width (on a log scale; the
    wider of two as near), times (width / that width)^p where the unit is wider, ``p`` from
    :data:`WIDTH_POWER`. A narrower unit is not scaled down (a unit's fixed costs do not
    shrink with the work). None where ``seen`` is empty."""
    seen = {w: s for w, s in seen.items() if w > 0 and s is not None and math.isfinite(s)}
    if not seen:
        return None
    ref = min(seen, key=lambda w: (abs(math.log(w / width)), -w))
    if width <= ref:
        return seen[ref]
    lo, hi = WIDTH_POWER
    power = hi
    narrower = sorted(w for w in seen if w < ref)
    if narrower and seen[narrower[-1]] > 0 and seen[ref] > 0:
        w0 = narrower[-1]
        power = min(hi, max(lo, math.log(seen[ref] / seen[w0]) / math.log(ref / w0)))
    return seen[ref] * (width / ref) ** power


def run_pace(unit, pace: Pace) -> float:
    """Seconds a unit takes at this run's pace so far: the mean of its timed units (0 before
    the first, so that a run always starts)."""
    return sum(pace.seconds) / len(pace.seconds) if pace.seconds else 0.0


def held(rows: Iterable[dict], row_key: Callable[[dict], Hashable]) -> dict:
    """The table's rows by unit key."""
    out: dict = {}
    for r in rows:
        out.setdefault(row_key(r), []).append(r)
    return out


def pending(
    units: Sequence,
    rows: Iterable[dict],
    key: Callable[[Any], Hashable],
    row_key: Callable[[dict], Hashable],
    complete: Callable[[Any, list[dict]], bool] | None = None,
) -> list:
    """The units the rows do not hold (completely, by ``complete(unit, its rows)``; by
    default any row of the unit's key is enough), in order."""
    have = held(rows, row_key)
    done = complete or (lambda unit, unit_rows: bool(unit_rows))
    return [u for u in units if not done(u, have.get(key(u), []))]


def table_rows(out, columns: Sequence[str] = (), kind: str = "grid") -> list[dict]:
    """The rows ``out`` holds (none when it does not exist); a table without the key
    ``columns``, with a row whose key is empty (NaN) or with a column of the wrong type for a
    ``kind`` the schema knows is not what the runner writes: one sentence, the file left
    untouched."""
    done = read_table(out)
    if not len(done):
        return []
    missing = [c for c in columns if c not in done.columns]
    blank = [c for c in columns if c not in missing and done[c].isna().any()]
    wrong = wrong_types(done, kind) if kind in SCHEMAS else []
    if missing or blank or wrong:
        what = (
            f"missing columns {', '.join(missing)}"
            if missing
            else f"rows without a {blank[0]}"
            if blank
            else f"column(s) of the wrong type: {', '.join(wrong)}"
        )
        raise UserError(f"{out} is not a yolo_sm {kind} table ({what}); choose another output file")
    return done.to_dict("records")


def run_grid(
    units: Sequence,
    measure: Callable[[Any, Any], list[dict]],
    *,
    key: Callable[[Any], Hashable],
    row_key: Callable[[dict], Hashable],
    group: Callable[[Any], Hashable] = lambda unit: None,
    open_group: Callable[[Any], Any] = lambda unit: None,
    complete: Callable[[Any, list[dict]], bool] | None = None,
    out: str | os.PathLike | None = None,
    columns: Sequence[str] = (),
    kind: str = "grid",
    metadata: dict | None = None,
    deadline: float | None = None,
    estimate: Callable[[Any, Pace], float] = run_pace,
    clock: Callable[[], float] | None = None,
    seconds_column: str | None = None,
    describe: Callable[[Any], str] = str,
    progress: bool = True,
    device: str | None = None,
):
    """Measure every unit of ``units`` that ``out`` does not hold; returns the whole table
    (a DataFrame: the rows read from ``out``, then the new ones).

    ``measure(unit, state)`` returns the unit's rows, ``state`` being what ``open_group`` made
    for the unit's group (called once per group of consecutive units with the same
    ``group(unit)``); ``key(unit)`` and ``row_key(row)`` name a unit, and a unit's old rows are
    replaced by its new ones. ``complete(unit, rows)``: whether the table's rows of a unit make
    it done (default: any row). ``out``: the parquet file (none: nothing is read or written),
    checked to hold the key ``columns``; ``metadata`` goes into its schema (its ``argv``, the
    command line, as a user would type it: :func:`yolo_sm.contract.scrub.user_argv`). While
    the run lasts it holds ``out``'s one-writer lock: a second run on the same output stops
    with one sentence before measuring anything.

    ``deadline`` (a ``clock()`` value, ``time.monotonic`` by default) skips a group whose
    units, at ``estimate(unit, pace)`` seconds each, would end past it, goes on with the next
    groups that fit (a long unit does not hold back shorter ones behind it), and stops before
    any unit that would start
    past it. ``seconds_column``: a column that records on every row
    the seconds its unit took (the first unit of a group includes the group's opening).
    ``device``: where the units are measured; a table whose rows another GPU model measured
    is not added to (:func:`check_rows_gpu`)."""
    import contextlib

    if metadata and "argv" in metadata:
        metadata = {**metadata, "argv": user_argv(metadata["argv"])}
    if out is None:
        lock = contextlib.nullcontext()
    else:
        out = check_output_path(out)
        lock = output_lock(out)
    with lock:
        return _run_grid(
            units, measure, key, row_key, group, open_group, complete, out, columns, kind,
            metadata, deadline, estimate, clock, seconds_column, describe, progress, device,
        )  # fmt: skip


def check_rows_gpu(rows: list[dict], device: str | None, out) -> None:
    """Stop before measuring on ``device`` into the table ``out`` whose ``rows`` were measured
    on another GPU model, or on a GPU where ``device`` is a CPU (the rows' ``prov_gpu_name``):
    a table compares its rows with each other, so one machine's rows resumed on another would
    pass for one machine's. Rows without a GPU name (a CPU's, or an error row without
    provenance) say nothing; ``device`` None, or a GPU that torch cannot name, checks
    nothing."""
    name = gpu_name(device) if device else None
    seen = sorted({g for r in rows if isinstance(g := r.get("prov_gpu_name"), str) and g})
    here = gpu_clash(seen, device, name)
    if here:
        raise UserError(
            f"{out} holds rows measured on {', '.join(seen)} and {here}: write to another "
            "file, one per GPU model"
        )


def _run_grid(
    units, measure, key, row_key, group, open_group, complete, out, columns, kind, metadata,
    deadline, estimate, clock, seconds_column, describe, progress, device,
):  # fmt: skip
    import pandas as pd
    from tqdm.auto import tqdm

    clock = clock or time.monotonic
    rows: list[dict] = []
    if out is not None:
        rows = table_rows(out, columns, kind)
        check_rows_gpu(rows, device, out)
        remove_stale_partials(out)
        regs = read_metadata(out).get("registrations") if out.exists() else None
        if regs:  # the table's own manifest registrations stay with it (contract.manifest)
            metadata = {**(metadata or {}), "registrations": regs}
    todo = pending(units, rows, key, row_key, complete)
    pace = Pace(rows=rows)
    bar = tqdm(total=len(todo), desc=kind, unit="unit", disable=not progress, file=sys.stderr)
    try:
        for _, members in itertools.groupby(todo, key=group):
            members = list(members)
            need = _need(members, pace, estimate) if deadline is not None else 0.0
            if deadline is not None and clock() + need > deadline:
                left = max(deadline - clock(), 0)
                print(
                    f"{kind}: skipping {describe(members[0])}: its {len(members)} unit(s) "
                    f"need about {need:.0f} s and would end past the deadline ({left:.0f} s "
                    "left); a run with that much time measures them together",
                    file=sys.stderr,
                )
                bar.update(len(members))
                continue
            start = clock()
            state = open_group(members[0])
            try:
                for unit in members:
                    if deadline is not None and clock() > deadline:
                        break
                    bar.set_postfix_str(describe(unit))
                    new = measure(unit, state)
                    took = clock() - start
                    pace.seconds.append(took)
                    if seconds_column:
                        new = [{**r, seconds_column: took} for r in new]
                    k = key(unit)
                    rows[:] = [r for r in rows if row_key(r) != k] + list(new)
                    if out is not None:
                        write_atomic(pd.DataFrame(rows), out, metadata)
                    bar.update(1)
                    start = clock()
            finally:
                state = None
                free_memory(collect=True)
    finally:
        bar.close()
    return pd.DataFrame(rows)


def _need(members, pace: Pace, estimate) -> float:
    """A group's seconds: all its units at their estimated seconds."""
    return float(sum(estimate(u, pace) for u in members))

"""The resumable runner of every grid of measurements: :func:`run_grid` skips held units and
rewrites the table atomically after each unit."""

from __future__ import annotations

import gc
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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


def free_memory(collect: bool = True) -> None:
    """Release cached GPU memory; ``collect``: a full ``gc.collect`` first (an OOM leaves
    reference cycles through the traceback)."""
    import torch

    if collect:
        gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@dataclass
class Pace:
    """What a run knows to estimate the next unit: the table's rows and this run's unit seconds."""

    rows: list[dict] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


#: bounds of the power of the width a unit's seconds grow with (:func:`width_scaled`)
WIDTH_POWER = (1.0, 2.0)


def longest_by_width(rows, keep: Callable[[dict], bool]) -> dict[float, float]:
    """Width -> the longest ``unit_s`` among the ``rows`` that ``keep`` accepts."""
    seen: dict[float, float] = {}
    for r in rows:
        took = r.get("unit_s")
        if took is not None and math.isfinite(took) and keep(r):
            seen[r["width"]] = max(seen.get(r["width"], 0.0), float(took))
    return seen


def width_scaled(seen: dict[float, float], width: float) -> float | None:
    """Seconds of a unit of ``width`` from ``seen`` (width -> s): the nearest width's, times
    (width / it)^p where wider, ``p`` fitted within :data:`WIDTH_POWER`; None where empty."""
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
    """The mean seconds of this run's units so far (0 before the first: a run always starts)."""
    return sum(pace.seconds) / len(pace.seconds) if pace.seconds else 0.0


def pending(
    units: Sequence,
    rows: Iterable[dict],
    key: Callable[[Any], Hashable],
    row_key: Callable[[dict], Hashable],
    complete: Callable[[Any, list[dict]], bool] | None = None,
) -> list:
    """The units the rows do not hold (completely, by ``complete(unit, its rows)``), in order."""
    have: dict = {}
    for r in rows:
        have.setdefault(row_key(r), []).append(r)
    done = complete or (lambda unit, unit_rows: bool(unit_rows))
    return [u for u in units if not done(u, have.get(key(u), []))]


def table_rows(out, columns: Sequence[str] = (), kind: str = "grid") -> list[dict]:
    """The rows ``out`` holds; one sentence where it lacks the key ``columns``, has an empty key
    or a column of the wrong type for ``kind``."""
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


def held(units, out, columns, kind, key, row_key, complete=None) -> tuple[list[dict], list]:
    """(the rows the table ``out`` holds, the ``units`` it lacks: :func:`pending`)."""
    rows = table_rows(Path(out), columns, kind)
    return rows, pending(units, rows, key, row_key, complete)


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
    """Measure every unit ``out`` (parquet or None) lacks, ``measure(unit, open_group(unit))``
    once per run of a ``group``; skip a group ending past ``deadline``; the whole table."""
    import contextlib

    import pandas as pd
    from tqdm.auto import tqdm

    if metadata and "argv" in metadata:
        metadata = {**metadata, "argv": user_argv(metadata["argv"])}
    out = None if out is None else check_output_path(out)
    clock = clock or time.monotonic
    rows: list[dict] = []
    with contextlib.nullcontext() if out is None else output_lock(out):
        if out is not None:
            rows = table_rows(out, columns, kind)
            seen = sorted({g for r in rows if isinstance(g := r.get("prov_gpu_name"), str) and g})
            here = gpu_clash(seen, device, gpu_name(device) if device else None)
            if here:
                raise UserError(
                    f"{out} holds rows measured on {', '.join(seen)} and {here}: write to "
                    "another file, one per GPU model"
                )
            remove_stale_partials(out)
            regs = read_metadata(out).get("registrations") if out.exists() else None
            if regs:  # the table's own manifest registrations stay with it
                metadata = {**(metadata or {}), "registrations": regs}
        todo = pending(units, rows, key, row_key, complete)
        pace = Pace(rows=rows)
        bar = tqdm(total=len(todo), desc=kind, unit="unit", disable=not progress, file=sys.stderr)
        with bar:
            for _, members in itertools.groupby(todo, key=group):
                members = list(members)
                need = sum(estimate(u, pace) for u in members) if deadline is not None else 0.0
                if deadline is not None and clock() + need > deadline:
                    print(
                        f"{kind}: skipping {describe(members[0])}: its {len(members)} unit(s) "
                        f"need about {need:.0f} s and would end past the deadline "
                        f"({max(deadline - clock(), 0):.0f} s left); a run with that much time "
                        "measures them together",
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
    return pd.DataFrame(rows)

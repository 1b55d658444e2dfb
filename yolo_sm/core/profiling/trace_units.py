"""A plan's trace step: one PyTorch-profiler trace per config through the grid runner, kernels
attributed to layers; traces kept as ``traces/<step>-<config>.json.gz`` and reused after a kill
(by the same code: their provenance beside them).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import config_label, parse_config
from yolo_sm.contract.store import read_metadata, write_atomic
from yolo_sm.core.grid import Pace, held, longest_by_width, run_grid, run_pace, width_scaled
from yolo_sm.core.profiling import kineto
from yolo_sm.core.profiling.target import engine_of, label_of, model_of
from yolo_sm.core.provenance import read_sidecar, source_digest, stamp

#: the column that names a trace table's unit
KEY = ("config",)
#: the folder beside the table that holds each config's trace
TRACES = "traces"


@dataclass(frozen=True)
class TraceSpec:
    """A trace step's configs: ``grid`` holds (width of ``family`` or model spec, precision,
    layout, batch) in run order; ``name`` prefixes each trace's file name."""

    name: str
    family: str
    grid: tuple
    imgsz: int
    device: str
    backend: str = "eager"
    compile_mode: str = "default"
    iters: int = 2

    def units(self) -> list[tuple]:
        return list(self.grid)

    def label(self, unit) -> str:
        return config_label(*label_of(self.family, unit[0]), *unit[1:])

    def trace_path(self, out: Path, unit) -> Path:
        """Where ``unit``'s trace goes for the table ``out``."""
        return Path(out).parent / TRACES / f"{self.name}-{self.label(unit)}.json.gz"


def _kernels(path: Path):
    """The kernel rows of the trace kept at ``path`` and the provenance it was taken under;
    None where it is absent, unreadable (a trace cut short by a kill), without its provenance
    or taken by other code (its ``yolo_sm_source``): such a config is traced again."""
    prov = read_sidecar(path)
    if not path.exists() or prov is None or prov.get("yolo_sm_source") != source_digest():
        return None
    try:
        return kineto.load_kernels(path), prov
    except UserError:
        return None


def _complete(spec: TraceSpec, out: Path):
    """Whether the table holds a config: rows of it, or a readable trace of it without GPU
    kernels (a CPU's trace, which adds no row)."""

    def complete(unit, rows) -> bool:
        if rows:
            return True
        found = _kernels(spec.trace_path(out, unit))
        return found is not None and found[0].empty

    return complete


def _held(spec: TraceSpec, out) -> tuple[list[dict], list[tuple]]:
    return held(spec.units(), out, KEY, "trace", spec.label, _row_key, _complete(spec, Path(out)))


def missing_units(spec: TraceSpec, out) -> list[tuple]:
    """The configs of ``spec`` that the table ``out`` does not hold (all when it is absent)."""
    return _held(spec, out)[1]


def _row_key(row) -> str:
    return row["config"]


def _by_width(rows) -> list[dict]:
    """Per config the rows hold, its ``unit_s`` (every row of a config carries the same) with
    the width its label names (a model given as a file or module has none and is left out)."""
    out = []
    for config, took in {r.get("config"): r.get("unit_s") for r in rows}.items():
        width = parse_config(config, strict=False)["width"]
        if not math.isnan(width):
            out.append({"width": width, "unit_s": took})
    return out


def unit_estimate(spec: TraceSpec, unit, pace: Pace) -> float:
    """Seconds a config will take: the rows' longest ``unit_s`` per width scaled to its width
    (:func:`yolo_sm.core.grid.width_scaled`), else this run's mean pace."""
    width = parse_config(spec.label(unit), strict=False)["width"]
    seen = longest_by_width(_by_width(pace.rows), lambda r: True)
    est = None if math.isnan(width) else width_scaled(seen, width)
    return run_pace(unit, pace) if est is None else est


def missing_seconds(spec: TraceSpec, out) -> float | None:
    """Seconds the configs the table ``out`` lacks will take (:func:`unit_estimate`); None
    where no row recorded its seconds or a missing config's width cannot be scaled to."""
    rows, todo = _held(spec, out)
    if not longest_by_width(_by_width(rows), lambda r: True):
        return None
    pace = Pace(rows=rows)
    est = [unit_estimate(spec, u, pace) for u in todo]
    return None if not all(est) else sum(est)


def run_traces(
    spec: TraceSpec,
    out: str | os.PathLike,
    progress: bool = True,
    deadline: float | None = None,
    est_unit_s: float | None = None,
):
    """Trace every config of ``spec`` the table ``out`` lacks and append its kernel rows (with
    provenance and ``unit_s``); a model whose configs would end past ``deadline`` waits."""
    out = Path(out)
    columns: list[str] = []

    def measure(unit, model):
        label = spec.label(unit)
        path = spec.trace_path(out, unit)
        kept = _kernels(path)
        if kept is None:
            eng, x = engine_of(spec.family, unit, model, spec.imgsz, spec.device,
                               spec.backend, spec.compile_mode)  # fmt: skip
            try:
                hooked = eng.module if spec.backend == "eager" else None
                kineto.capture(lambda: eng(x), path, model=hooked, iters=spec.iters,
                               device=spec.device)  # fmt: skip
            finally:
                eng.close()
            kept = _kernels(path)
            if kept is None:
                raise UserError(f"{path}: the trace just taken cannot be read back")
        frame, prov = kept  # the rows carry the provenance of the trace they come from
        prov = {k: v for k, v in prov.items() if k not in ("iters", "warmup")}
        frame = frame.assign(config=label, backend=spec.backend, **stamp(prov))
        columns[:] = list(frame.columns)
        return frame.to_dict("records")

    def estimate(unit, pace: Pace) -> float:
        est = unit_estimate(spec, unit, pace)
        return est if est or not est_unit_s else est_unit_s

    df = run_grid(
        spec.units(),
        measure,
        key=spec.label,
        row_key=_row_key,
        group=lambda u: u[0],
        open_group=lambda u: model_of(spec.family, u[0], spec.imgsz),
        complete=_complete(spec, out),
        out=out,
        columns=KEY,
        kind="trace",
        metadata={
            "spec": {**asdict(spec), "grid": [list(map(str, u)) for u in spec.grid]},
            "argv": sys.argv,
        },  # fmt: skip
        deadline=deadline,
        estimate=estimate,
        seconds_column="unit_s",
        describe=spec.label,
        progress=progress,
        device=spec.device,
    )
    if df.empty and columns:  # no GPU kernels (a CPU): the table keeps its columns
        import pandas as pd

        df = pd.DataFrame(columns=[*columns, "unit_s"])
        write_atomic(df, out, read_metadata(out))  # the metadata the grid runner wrote
    return df

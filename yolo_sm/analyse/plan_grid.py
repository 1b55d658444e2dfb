"""The points a plan's sweep steps name, and those a sweep table still lacks, without the
collect layer: the grid is expanded from the step's parameters as the sweep runner crosses them
(``collect.sweep.SweepSpec.points``; a test keeps the two equal), so a notebook can say which
planned points a root lacks on a machine without torch. Points are keyed by family, size (the
width multiplier as text, or a preset letter: a preset's width is whatever the preset says, so
the letter is the key), precision, layout, backend, batch and image size."""

from __future__ import annotations

import itertools

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import Plan, load_plan
from yolo_sm.contract.vocab import INT8_BACKENDS, INT8_BACKENDS_ONLY

PRESET_LETTERS = tuple("nsmlx")

POINT_KEYS = ("family", "size", "precision", "layout", "backend", "batch", "imgsz")


def unsupported(precision: str, layout: str, backend: str, device: str = "cuda") -> str | None:
    """Why the sweep runner leaves a grid combination out, or None (the rules
    ``collect.sweep.unsupported_reason`` applies to a point)."""
    if precision == "int8" and backend not in INT8_BACKENDS:
        return INT8_BACKENDS_ONLY
    if backend == "onnxruntime" and precision != "fp32":
        return "onnxruntime runs fp32 only"
    if backend == "tensorrt" and precision in ("tf32", "bf16"):
        return "tensorrt engines here are fp32/fp16/int8"
    if backend in ("onnxruntime", "tensorrt") and layout == "nhwc":
        return f"{backend} picks its own layouts (run it with nchw input)"
    if backend == "cudagraph" and not device.startswith("cuda"):
        return "cudagraph needs a CUDA device"
    if precision == "tf32" and not device.startswith("cuda"):
        return "tf32 exists only on a GPU"
    return None


def _values(v, default):
    if v is None:
        return list(default)
    if isinstance(v, str):
        return [x.strip() for x in v.split(",") if x.strip()]
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _size(w) -> str:
    """A width multiplier as text (``"0.25"``) or a preset letter (``"n"``)."""
    if isinstance(w, str) and w.strip().lower() in PRESET_LETTERS:
        return w.strip().lower()
    return f"{float(w):g}"


def plan_points(params: dict, device: str = "cuda"):
    """Every point a sweep step's ``params`` name, as the sweep runner crosses them (families x
    widths x precisions x layouts x backends x batches x image sizes, defaults as the runner's),
    less the combinations it cannot run on ``device`` (:func:`unsupported`). Columns:
    :data:`POINT_KEYS` (``size`` is the width multiplier as text or the preset letter)."""
    p = {k: params.get(k) for k in ("family", "widths", "precisions", "layouts", "backends")}
    grid = itertools.product(
        [str(x).lower() for x in _values(p["family"], ["yolov8"])],
        [_size(w) for w in _values(p["widths"], [1.0])],
        [str(x).lower() for x in _values(p["precisions"], ["fp16"])],
        [str(x).lower() for x in _values(p["layouts"], ["nhwc"])],
        [str(x).lower() for x in _values(p["backends"], ["eager"])],
        [int(x) for x in _values(params.get("batches"), [1])],
        [int(x) for x in _values(params.get("imgsz"), [640])],
    )
    rows = [dict(zip(POINT_KEYS, g, strict=True)) for g in grid]
    rows = [
        r for r in rows if unsupported(r["precision"], r["layout"], r["backend"], device) is None
    ]
    return pd.DataFrame(rows, columns=list(POINT_KEYS)).drop_duplicates(ignore_index=True)


def sweep_points(sweep):
    """The points a sweep table holds, keyed as :func:`plan_points` (preset rows by their
    letter, the others by their width multiplier)."""
    scale = (
        sweep["scale"].fillna("").astype(str) if "scale" in sweep else pd.Series("", sweep.index)
    )
    size = scale.where(scale != "", sweep.width.map(_size))
    out = pd.DataFrame(
        {
            "family": sweep["family"].astype(str) if "family" in sweep else "yolov8",
            "size": size,
            "precision": sweep.precision.astype(str),
            "layout": sweep.layout.astype(str),
            "backend": sweep.backend.astype(str),
            "batch": sweep.batch.astype(int),
            "imgsz": sweep["imgsz"].astype(int) if "imgsz" in sweep else 640,
        }
    )
    return out.drop_duplicates(ignore_index=True)


def root_plan(root: DataRoot) -> Plan | None:
    """The plan the root's datasets were collected with (:meth:`DataRoot.plan_file`); None
    when there is none."""
    path = root.plan_file()
    return load_plan(path) if path else None


MISSING_COLUMNS = ["step", "precision", "layout", "backend", "widths", "batches", "points"]


def missing_points(sweep, plan: Plan, steps):
    """The points of the plan's sweep ``steps`` (a name or a list; all their points) that
    ``sweep`` lacks, grouped per precision, layout and backend: the widths (or presets) and
    batches still to measure, with the step that measures them. ``planned`` (every row): how
    many points the steps name (also ``attrs["planned"]``, which an empty table keeps);
    ``attrs["not_in_plan"]``: the steps the plan lacks. Raises
    ``UserError`` when the plan has none of ``steps``."""
    names = [steps] if isinstance(steps, str) else list(steps)
    by_name = {s.name: s for s in plan.steps}
    known = [n for n in names if n in by_name]
    if not known:
        raise UserError(f"plan {plan.name} has no step {', '.join(names)}")
    pts = pd.concat(
        [plan_points(by_name[n].params, plan.device).assign(step=n) for n in known],
        ignore_index=True,
    )
    have = sweep_points(sweep)
    m = pts.merge(have.assign(_have=True), on=list(POINT_KEYS), how="left")
    m = m[m._have.isna()]
    if m.empty:
        out = pd.DataFrame(columns=MISSING_COLUMNS)
    else:
        out = (
            m.groupby(["step", "precision", "layout", "backend"], sort=False)
            .agg(
                widths=("size", lambda s: ", ".join(sorted(set(s), key=_size_key))),
                batches=("batch", lambda s: ", ".join(str(b) for b in sorted(set(s)))),
                points=("size", "size"),
            )
            .reset_index()
            .groupby(["step", "precision", "layout", "widths", "batches"], sort=False)
            .agg(backend=("backend", " + ".join), points=("points", "sum"))
            .reset_index()
        )
        order = {n: i for i, n in enumerate(known)}
        out = out[MISSING_COLUMNS].sort_values("step", kind="stable", key=lambda c: c.map(order))
    out = out.reset_index(drop=True).assign(planned=len(pts))
    out.attrs["planned"] = len(pts)
    out.attrs["not_in_plan"] = [n for n in names if n not in by_name]
    return out


def missing_for(root: DataRoot, sweep, steps):
    """:func:`missing_points` of ``sweep`` against the root's plan (:func:`root_plan`); None
    when there is no sweep, no plan, or the plan has none of ``steps``."""
    plan = root_plan(root)
    if sweep is None or plan is None or not any(s.name in steps for s in plan.steps):
        return None
    return missing_points(sweep, plan, steps)


def _size_key(s: str):
    return (1, PRESET_LETTERS.index(s)) if s in PRESET_LETTERS else (0, float(s))

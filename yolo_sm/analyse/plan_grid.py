"""The points a plan's sweep steps name and those a sweep table lacks, without torch (the grid
is crossed as ``core.sweep`` does; a test keeps them equal). Points are keyed by family, size
(width as text, or a preset letter), precision, layout, backend, batch and image size."""

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
    """Why the sweep runner leaves a grid combination out, or None."""
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
    if isinstance(w, str) and w.strip().lower() in PRESET_LETTERS:
        return w.strip().lower()
    return f"{float(w):g}"


def plan_points(params: dict, device: str = "cuda"):
    """Every point a sweep step's ``params`` cross, less those :func:`unsupported` on
    ``device``; columns :data:`POINT_KEYS`."""
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
    rows = [dict(zip(POINT_KEYS, g, strict=True)) for g in grid if not unsupported(*g[2:5], device)]
    return pd.DataFrame(rows, columns=list(POINT_KEYS)).drop_duplicates(ignore_index=True)


def sweep_points(sweep):
    """The points a sweep table holds, keyed as :func:`plan_points`."""
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
    """The plan the root's datasets were collected with, or None."""
    path = root.plan_file()
    return load_plan(path) if path else None


MISSING_COLUMNS = ["step", "precision", "layout", "backend", "widths", "batches", "points"]


def missing_points(sweep, plan: Plan, steps):
    """The points of the plan's sweep ``steps`` that ``sweep`` lacks, per step, precision,
    layout and backends: widths and batches to measure; ``planned`` (and ``attrs``): how many
    points the steps name; ``attrs["not_in_plan"]``. UserError when the plan has no such step."""
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
    """:func:`missing_points` against the root's plan; None without sweep, plan or step."""
    plan = root_plan(root)
    if sweep is None or plan is None or not any(s.name in steps for s in plan.steps):
        return None
    return missing_points(sweep, plan, steps)


def _size_key(s: str):
    return (1, PRESET_LETTERS.index(s)) if s in PRESET_LETTERS else (0, float(s))

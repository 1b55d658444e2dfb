"""Re-measure random points of a shipped sweep with its own settings, and compare.

Whether a shipped sweep repeats ("re-measuring five random sweep points with the same command
lands within 10 % of the shipped figures"), as one command::

    yolo-sm remeasure --dataset h200/sweep_fp16_nhwc --points 5 --seed 20261130 \\
        --out remeasure.parquet

Points are drawn among the table's ``ok`` rows with ``pandas.DataFrame.sample`` (a seed makes
the draw reproducible on any machine, so the points can be named before the GPU is). Each is
built and timed through the sweep's own ``run_point`` with the timing settings stored in the
table's metadata (``budget_ms``, ``warmup_ms``; the defaults of ``yolo-sm sweep`` where a table
has none), so only the machine, the moment and the process differ; the points run over the grid
runner (:func:`yolo_sm.collect.grid.run_grid`: one model built once for its points, the output
written after every point, a killed run continued by the same command). The output has one row
per point: its key, the shipped and new img/s, ``ratio`` = new / shipped, ``within_10pct``, both
dates and ``launch_bound``: an eager point at batch <= 8, the kind that moved by up to 2x between
two runs on one machine while the others repeated within ~2 % (data/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from yolo_sm.analyse.remeasure import launch_bound, within_tolerance
from yolo_sm.collect.grid import run_grid
from yolo_sm.collect.models import model_flops
from yolo_sm.collect.sweep import Point, SweepSpec, build_model, failure, run_point
from yolo_sm.contract import datasets
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import KEY_COLUMNS


def _timing_settings(name: str) -> dict:
    """``budget_ms`` / ``warmup_ms`` the shipped table was measured with (parquet metadata)."""
    import pyarrow.parquet as pq

    path = datasets.path(name)
    try:
        meta = pq.read_schema(path).metadata or {}
        spec = json.loads(meta.get(b"yolo_sm", b"{}")).get("spec", {})
    except Exception:  # noqa: BLE001 - unreadable metadata: the sweep's defaults
        spec = {}
    return {k: float(spec[k]) for k in ("budget_ms", "warmup_ms") if spec.get(k) is not None}


def pick(df, n: int, seed: int):
    """``n`` random ``ok`` rows of a sweep table (reproducible for a seed), in model order."""

    ok = df[df.status == "ok"]
    if n < 1:
        raise UserError("--points must be at least 1")
    if n > len(ok):
        raise UserError(f"asked for {n} points, the table has {len(ok)} measured (ok) points")
    return ok.sample(n, random_state=seed).sort_values(list(KEY_COLUMNS[:5]), kind="stable")


def _point(r, device: str | None) -> Point:
    key = {c: r[c] for c in KEY_COLUMNS}
    key["scale"] = key["scale"] if isinstance(key["scale"], str) else ""
    if device:
        key["device"] = device
    model = r.get("model")  # the model spec of a row measured by spec (absent in older tables)
    return Point(**key, model=model if isinstance(model, str) else "")


def remeasure(
    name: str,
    n: int = 5,
    seed: int = 0,
    device: str | None = None,
    out: str | Path | None = None,
    progress: bool = True,
):
    """Re-measure ``n`` random points of sweep dataset ``name``; returns the comparison table
    (written atomically to ``out`` after every point when given; a rerun into the same ``out``
    measures only the points it lacks). ``device`` overrides the points' device (e.g. ``cpu``
    for a dry run; the ratios then compare different machines)."""
    entry = datasets.info(name)
    if entry.get("kind") != "sweep":
        raise UserError(f"{name} is a {entry.get('kind')} dataset; remeasure takes a sweep")
    old = datasets.load(name)
    points = pick(old, n, seed)
    timing = _timing_settings(name)
    shipped = [(_point(r, device), r) for _, r in points.iterrows()]

    def open_model(unit):
        p = unit[0]
        try:
            return build_model(p)
        except Exception as e:  # noqa: BLE001 - a point that cannot be built is a row
            return e

    def measure(unit, model) -> list[dict]:
        p, r = unit
        if isinstance(model, BaseException):
            new = {**failure(model), "img_per_s": float("nan")}
        else:
            spec = SweepSpec(device=p.device, **timing)
            new = run_point(model, p, spec, model_flops(model, p.imgsz))
        ratio = new.get("img_per_s", float("nan")) / r["img_per_s"]
        return [
            {
                **{c: getattr(p, c) for c in KEY_COLUMNS},  # the device measured on
                "shipped_img_per_s": float(r["img_per_s"]),
                "new_img_per_s": float(new.get("img_per_s", float("nan"))),
                "ratio": float(ratio),
                "within_10pct": bool(within_tolerance(ratio)),
                "launch_bound": bool(launch_bound(r["backend"], r["batch"])),
                "status": new.get("status", "ok"),
                "message": new.get("message", ""),
                "shipped_date_utc": r.get("prov_date_utc"),
                "new_date_utc": new.get("prov_date_utc"),
                "new_gpu_name": new.get("prov_gpu_name"),
                "budget_ms": timing.get("budget_ms", SweepSpec.budget_ms),
            }
        ]

    return run_grid(
        shipped,
        measure,
        key=lambda unit: unit[0].key(),
        row_key=lambda row: tuple(row[c] for c in KEY_COLUMNS),
        group=lambda unit: unit[0].model_key(),
        open_group=open_model,
        out=out,
        columns=KEY_COLUMNS,
        kind="remeasure",
        metadata={"dataset": name, "points": n, "seed": seed},
        describe=lambda unit: f"{unit[0].family} w{unit[0].width:g} b{unit[0].batch}",
        progress=progress,
    )


def summary(df) -> str:
    """One line: how many points landed within 10 %, and the ratios."""
    ok = df[df.status == "ok"]
    ratios = ", ".join(f"{x:.3f}" for x in ok.ratio)
    return (
        f"{int(ok.within_10pct.sum())} of {len(df)} points within 10 % of the shipped img/s "
        f"(new / shipped: {ratios or 'none measured'})"
    )

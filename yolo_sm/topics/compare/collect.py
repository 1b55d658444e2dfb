"""``yolo-sm remeasure``: random ``ok`` points of a shipped sweep timed again with its own
settings (resumable) and compared through :mod:`yolo_sm.analyse.regress`; a non-graph point
brings its same-process CUDA-graph reference, on which a host-bound point is decided."""

from __future__ import annotations

from pathlib import Path

from yolo_sm.analyse.hostbound import TOLERANCE, launch_bound
from yolo_sm.analyse.regress import POINT_COLUMNS, REFERENCE_BACKEND, repeat_points
from yolo_sm.contract import datasets
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import KEY_COLUMNS
from yolo_sm.contract.store import read_metadata
from yolo_sm.core.grid import run_grid
from yolo_sm.core.models import model_flops
from yolo_sm.core.sweep import Point, SweepSpec, build_model, failure, run_point

# fmt: off


def _timing_settings(name: str) -> dict:
    """``budget_ms`` / ``warmup_ms`` the shipped table was measured with (parquet metadata)."""
    spec = read_metadata(datasets.path(name)).get("spec") or {}
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


def reference_key(r) -> tuple | None:
    """The key of a row's same-process CUDA-graph reference (None for a graph row)."""
    if r["backend"] == REFERENCE_BACKEND:
        return None
    key = dict(zip(KEY_COLUMNS, (r[c] for c in KEY_COLUMNS), strict=True))
    key.update(backend=REFERENCE_BACKEND, compile_mode="default")
    return tuple(key[c] for c in KEY_COLUMNS)


def remeasure(
    name: str, n: int = 5, seed: int = 0, device: str | None = None, out: str | Path | None = None,
    progress: bool = True, tolerance: float = TOLERANCE,
):
    """:func:`comparison` of ``n`` random points of sweep ``name`` measured again; ``out``: the
    new rows in the sweep's format (resumable); ``device`` overrides the points' device."""
    import pandas as pd

    entry = datasets.info(name)
    if entry.get("kind") != "sweep":
        raise UserError(f"{name} is a {entry.get('kind')} dataset; remeasure takes a sweep")
    old = datasets.load(name)
    points = pick(old, n, seed)
    timing = _timing_settings(name)
    ok = old[old.status == "ok"]
    by_key = {tuple(r[c] for c in KEY_COLUMNS): r for _, r in ok.iterrows()}
    units, seen = [], set()
    graphs = str(device or "cuda").startswith("cuda")  # a CPU dry run has no CUDA graphs
    for _, r in points.iterrows():
        for role, key in (
            ("point", tuple(r[c] for c in KEY_COLUMNS)), ("reference", reference_key(r)),
        ):
            if key is None or key not in by_key or (role == "reference" and not graphs):
                continue
            p = _point(by_key[key], device)
            if p.key() not in seen:  # a drawn point may be another's reference
                seen.add(p.key())
                units.append((p, role))

    def open_model(unit):
        try:
            return build_model(unit[0])
        except Exception as e:  # noqa: BLE001 - a point that cannot be built is a row
            return e

    def measure(unit, model) -> list[dict]:
        p, role = unit
        if isinstance(model, BaseException):
            new = {**{c: getattr(p, c) for c in KEY_COLUMNS}, **failure(model)}
        else:
            spec = SweepSpec(device=p.device, **timing)
            new = run_point(model, p, spec, model_flops(model, p.imgsz))
        return [{**new, "role": role, "budget_ms": timing.get("budget_ms", SweepSpec.budget_ms)}]

    # points and references of one model run together: the same process, minutes apart
    new = run_grid(
        units,
        measure,
        key=lambda unit: unit[0].key(),
        row_key=lambda row: tuple(row[c] for c in KEY_COLUMNS),
        group=lambda unit: unit[0].model_key(),
        open_group=open_model,
        out=out,
        columns=KEY_COLUMNS,
        kind="remeasure",
        metadata={"dataset": name, "points": n, "seed": seed},
        describe=lambda unit: (
            f"{unit[0].family} w{unit[0].width:g} {unit[0].backend} b{unit[0].batch}"
        ),
        progress=progress,
        device=units[0][0].device if units else None,
    )
    shipped = points.copy()
    if device:
        shipped["device"] = device
        ok = ok.assign(device=device)
    return comparison(ok, shipped, pd.DataFrame(new), tolerance)


def comparison(shipped_all, drawn, new, tolerance: float = TOLERANCE):
    """Per drawn point: shipped and new img/s, ``ratio``, references, what decides it
    (``rule_metrics`` / ``rule_ratio``) and ``within_10pct`` (False if failed, None undecided)."""
    import pandas as pd

    keys = list(KEY_COLUMNS)
    status = new.reindex(columns=[*keys, "status", "message", "prov_date_utc", "prov_gpu_name"])
    measured = new[new["status"] == "ok"] if "status" in new else new.iloc[0:0]
    if len(measured):
        pts = repeat_points(shipped_all, measured, tolerance=tolerance)
    else:
        pts = pd.DataFrame(columns=[*keys, *POINT_COLUMNS])
    out = drawn[keys].merge(pts, on=keys, how="left").merge(status, on=keys, how="left")
    ratio = out["img_per_s_candidate"] / out["img_per_s_baseline"]
    same = out["img_per_s_change"].where(out["img_per_s_basis"] != "absolute")
    shipped_date = drawn["prov_date_utc"].to_numpy() if "prov_date_utc" in drawn else None
    return pd.DataFrame({
        **{k: out[k] for k in keys}, "shipped_img_per_s": drawn["img_per_s"].to_numpy(),
        "new_img_per_s": out.img_per_s_candidate, "ratio": ratio,
        "host_bound": out.host_bound.astype("boolean"), "basis": out.img_per_s_basis,
        "shipped_ref_img_per_s": out.img_per_s_baseline_ref,
        "new_ref_img_per_s": out.img_per_s_candidate_ref, "same_process_ratio": same,
        "rule_metrics": out.gated_metrics.fillna(""), "rule_ratio": out.gate_change,
        # a point that failed to run did not land within; undecided: None
        "within_10pct": out.within.where(out.status.eq("ok"), False),
        "launch_bound": launch_bound(out.backend, out.batch).astype(bool),
        "status": out.status.fillna("error"), "message": out.message.fillna(""),
        "shipped_date_utc": shipped_date, "new_date_utc": out.prov_date_utc,
        "new_gpu_name": out.prov_gpu_name,
    })


def summary(df) -> str:
    """One line: how many points landed within the tolerance, on what decided each."""
    decided = df[df.within_10pct.notna()]
    pairs = zip(decided["rule_ratio"], decided["rule_metrics"], strict=True)
    ratios = ", ".join(f"{x:.3f}{'' if str(m).startswith('img_per_s') else '*'}" for x, m in pairs)
    undecided = len(df) - len(decided)
    tail = (f"; {undecided} host-bound not decided (the shipped table lacks GPU busy time and "
            "launches per forward)") if undecided else ""
    return (
        f"{int(decided.within_10pct.astype(bool).sum())} of {len(df)} points within 10 % "
        f"(new / shipped img/s; * host-bound: GPU busy time and launches per forward, its "
        f"img/s reported only: {ratios or 'none measured'}){tail}"
    )

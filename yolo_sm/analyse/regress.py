"""Regression gate: a shared point regresses when a :data:`METRICS` metric moved the wrong way past
the tolerance; host-bound points' :data:`TIME_METRICS` are compared over a same-table reference."""

from __future__ import annotations

import math

from yolo_sm.analyse.hostbound import TOLERANCE, host_bound
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.schema import KEY_COLUMNS

#: metric column -> the direction that is better
METRICS = {
    "img_per_s": "higher",
    "median_ms": "lower",
    "p99_ms": "lower",
    "achieved_occupancy_tw_pct": "higher",
    "peak_mem_bytes": "lower",
    "tflops": "higher",
    "launches_per_forward": "lower",
    "gpu_busy_ms": "lower",
}
#: the metrics a host decides (through time): host-bound points report them, never gate on them
TIME_METRICS = ("img_per_s", "median_ms", "p99_ms", "tflops")
#: what the host cannot move: gated for every point, host-bound ones included
INVARIANT = ("gpu_busy_ms", "launches_per_forward")
BENCH_KEYS = ("family", "width", "batch", "variant")
REFERENCE_BACKEND = "cudagraph"
#: bytes a peak may move and stay within: cuDNN's benchmark mode picks each run's algorithms,
#: whose workspaces (tens of MiB) set a small forward's peak
MEMORY_FLOOR_BYTES = 64 * 2**20


def key_columns(df) -> tuple[str, ...]:
    """A sweep's :data:`KEY_COLUMNS` or a bench's :data:`BENCH_KEYS` (else UserError)."""
    if all(c in df for c in KEY_COLUMNS):
        return KEY_COLUMNS
    if all(c in df for c in BENCH_KEYS):
        return BENCH_KEYS
    missing = [c for c in KEY_COLUMNS if c not in df]
    raise UserError(
        f"the table lacks the key column(s) {', '.join(missing)} of a sweep "
        f"(or {', '.join(BENCH_KEYS)} of a bench), so its points cannot be matched"
    )


def _ok(df):
    out = df[df["status"] == "ok"] if "status" in df else df
    if "scope" in out:
        out = out[out["scope"] == "model_only"]
    return out


def _reference_columns(df, keys) -> list[str]:
    """The keys a point shares with its reference: all but the engine, plus precision/layout."""
    skip = ("backend", "compile_mode", "variant")
    cols = [c for c in keys if c not in skip]
    return cols + [c for c in ("precision", "layout") if c in df and c not in cols]


def with_reference(df, keys, metrics):
    """``df``'s ok rows with ``host_bound`` and ``ref_<metric>`` of the same table's
    :data:`REFERENCE_BACKEND` point (NaN where none)."""
    ok = _ok(df).copy()
    ok["host_bound"] = host_bound(ok).to_numpy()
    if "host_launch_us" not in ok:
        ok["host_launch_us"] = math.nan
    on = _reference_columns(ok, keys)
    ref = ok[ok["backend"] == REFERENCE_BACKEND].drop_duplicates(on)
    ref = ref[on + list(metrics)].rename(columns={m: f"ref_{m}" for m in metrics})
    return ok.merge(ref, on=on, how="left")


def compare(baseline, candidate, metrics=None, tolerance: float = TOLERANCE, keys=None):
    """One row per shared point and :data:`METRICS` metric (default: those both carry): values,
    ``change`` (candidate over baseline, each over its ``basis`` reference), ``regressed``."""
    import pandas as pd

    if not tolerance >= 0:
        raise UserError(f"the tolerance must be a fraction >= 0, got {tolerance}")
    keys = tuple(keys) if keys is not None else key_columns(baseline)
    missing = [c for c in keys if c not in candidate]
    if missing:
        raise UserError(
            f"the candidate table lacks the key column(s) {', '.join(missing)} of the baseline"
        )
    if metrics is None:
        metrics = [m for m in METRICS if m in baseline and m in candidate]
    else:
        unknown = [m for m in metrics if m not in METRICS]
        if unknown:
            raise UserError(
                f"unknown metric(s) {', '.join(unknown)}; choose among {', '.join(METRICS)}"
            )
        absent = [m for m in metrics if m not in baseline or m not in candidate]
        if absent:
            raise UserError(f"metric(s) {', '.join(absent)} missing from a table")
    if not metrics:
        raise UserError("the two tables share none of the metrics " + ", ".join(METRICS))
    a = with_reference(baseline, keys, metrics)
    b = with_reference(candidate, keys, metrics)
    m = a.merge(b, on=list(keys), suffixes=("_base", "_cand"))
    if m.empty:
        raise UserError("the candidate shares no measured (ok) point with the baseline")
    rows = []
    for _, r in m.iterrows():
        hb = bool(r["host_bound_base"]) or bool(r["host_bound_cand"])
        for metric in metrics:
            base, cand = float(r[f"{metric}_base"]), float(r[f"{metric}_cand"])
            base_ref = cand_ref = math.nan
            basis = "absolute"
            if hb and metric in TIME_METRICS:
                base_ref, cand_ref, basis = _reference(r, metric)
            if basis == "host_normalised":  # rates times the launch cost, times over it
                flip = METRICS[metric] == "lower"
                change = (cand / cand_ref if flip else cand * cand_ref) / (
                    base / base_ref if flip else base * base_ref
                )
            elif basis == "same_process":
                change = (cand / cand_ref) / (base / base_ref)
            elif basis == "absolute":
                change = cand / base if base else math.nan
            else:
                change = math.nan
            decided = not math.isnan(change)
            gated = basis == "absolute" and decided  # host-bound time: reported, not gated
            within = abs(change - 1) <= tolerance
            if metric == "peak_mem_bytes":  # a move under the floor is within, whatever its share
                within = within or abs(cand - base) <= MEMORY_FLOOR_BYTES
            worse = not within and (change < 1 if METRICS[metric] == "higher" else change > 1)
            rows.append(
                {
                    **{k: r[k] for k in keys},
                    "metric": metric,
                    "better": METRICS[metric],
                    "baseline": base,
                    "candidate": cand,
                    "host_bound": hb,
                    "basis": basis,
                    "baseline_ref": base_ref,
                    "candidate_ref": cand_ref,
                    "change": change,
                    "within": bool(within) if decided else None,
                    "gated": gated,
                    "regressed": bool(gated and worse),
                }
            )
    return pd.DataFrame(rows)


def _reference(r, metric: str) -> tuple[float, float, str]:
    """(baseline reference, candidate reference, basis) of a host-bound merged row."""
    if r["backend"] == REFERENCE_BACKEND:
        return math.nan, math.nan, "absolute"
    refs = [float(r[f"ref_{metric}_{s}"]) for s in ("base", "cand")]
    if not any(math.isnan(x) for x in refs):
        return refs[0], refs[1], "same_process"
    launch = [float(r.get(f"host_launch_us_{s}", math.nan)) for s in ("base", "cand")]
    if all(x > 0 for x in launch):  # (NaN fails)
        return launch[0], launch[1], "host_normalised"
    return math.nan, math.nan, "no_reference"


#: the columns of :func:`points` after the key columns
POINT_COLUMNS = (
    "host_bound", "img_per_s_change", "img_per_s_basis", "img_per_s_baseline",
    "img_per_s_candidate", "img_per_s_baseline_ref", "img_per_s_candidate_ref",
    "gpu_busy_change", "gated_metrics", "gate_change", "within", "regressed",
)  # fmt: skip


def points(cmp):
    """:func:`compare` rows folded to one row per point: keys and :data:`POINT_COLUMNS`
    (``gate_change``: the gated change farthest from 1; ``within`` None: undecided)."""
    import pandas as pd

    def first(rows, column, empty=math.nan):
        return rows[column].iloc[0] if len(rows) else empty

    keys = [c for c in cmp.columns if c in KEY_COLUMNS or c in BENCH_KEYS]
    rows = []
    for key, g in cmp.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        thr = g[g["metric"] == "img_per_s"]
        gated = g[g["gated"].astype(bool)]
        far = (gated["change"] - 1).abs().idxmax() if len(gated) else None
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "host_bound": bool(g["host_bound"].any()),
                "img_per_s_change": float(first(thr, "change")),
                "img_per_s_basis": str(first(thr, "basis", "")),
                "img_per_s_baseline": float(first(thr, "baseline")),
                "img_per_s_candidate": float(first(thr, "candidate")),
                "img_per_s_baseline_ref": float(first(thr, "baseline_ref")),
                "img_per_s_candidate_ref": float(first(thr, "candidate_ref")),
                "gpu_busy_change": float(first(g[g["metric"] == "gpu_busy_ms"], "change")),
                "gated_metrics": ",".join(gated["metric"]),
                "gate_change": float(gated.loc[far, "change"]) if far is not None else math.nan,
                "within": bool(gated["within"].astype(bool).all()) if len(gated) else None,
                "regressed": bool(gated["regressed"].any()),
            }
        )
    return pd.DataFrame(rows, columns=[*keys, *POINT_COLUMNS])


def repeat_points(baseline, candidate, keys=None, tolerance: float = TOLERANCE):
    """:func:`points` of a re-measure: img/s and the :data:`INVARIANT` metrics both carry."""
    metrics = ["img_per_s"] + [m for m in INVARIANT if m in baseline and m in candidate]
    return points(compare(baseline, candidate, metrics, tolerance, keys))


def verdict(cmp, tolerance: float = TOLERANCE) -> dict:
    """Counts of :func:`compare`'s points, rows, ``regressed``, ``outside`` and ``undecided``,
    and ``passed``."""
    gated = cmp["gated"].astype(bool) if len(cmp) else cmp.get("gated")
    pts = points(cmp) if len(cmp) else None
    return {
        "points": int(len(pts)) if pts is not None else 0,
        "rows": int(len(cmp)),
        "regressed": int((cmp["regressed"] & gated).sum()) if len(cmp) else 0,
        "outside": int(((cmp["within"] == False) & gated).sum()) if len(cmp) else 0,  # noqa: E712
        "undecided": int(pts["within"].isna().sum()) if pts is not None else 0,
        "tolerance": float(tolerance),
        "passed": not bool(cmp["regressed"].any()) if len(cmp) else True,
    }


def to_json(cmp, tolerance: float = TOLERANCE) -> dict:
    """:func:`verdict` plus every row (NaN as null), ready for ``json.dump``."""
    import json

    rows = json.loads(cmp.to_json(orient="records"))
    return {**verdict(cmp, tolerance), "comparisons": rows}

"""Time-weighted views over per-kernel tables, ready for heatmaps."""

from __future__ import annotations

from yolo_sm.analyse.kernels import with_kernel_class

#: the occupancy an Nsight Compute table measures per kernel
OCCUPANCY_COLUMNS = ("theoretical_occupancy_pct", "achieved_occupancy_pct")


def weighted_mean(values, weights) -> float:
    """Mean of ``values`` weighted by ``weights`` (Series), NaN values left out."""
    ok = values.notna()
    w = weights[ok]
    return float((values[ok] * w).sum() / w.sum()) if w.sum() > 0 else float("nan")


def time_weighted(df, by, cols=OCCUPANCY_COLUMNS):
    """Per group of ``by``: kernels, total time (us), and ``cols`` weighted by kernel time."""
    by = [by] if isinstance(by, str) else list(by)
    df = df.reindex(columns=[*by, "duration_us", *cols]).astype(object) if df.empty else df
    w = df["duration_us"].astype(float)
    parts = {"kernels": w, "time_us": w}
    for c in cols:  # each mean over the kernels whose value is known
        parts[f"{c} num"], parts[f"{c} den"] = df[c] * w, w.where(df[c].notna())
    g = df[by].assign(**parts).groupby(by, observed=True)
    out = g.sum().assign(kernels=g.size())
    for c in cols:
        out[_tw_name(c)] = (out.pop(f"{c} num") / (d := out.pop(f"{c} den"))).where(d > 0)
    return out.reset_index()


def _tw_name(col: str) -> str:
    return f"{col.removesuffix('_pct')}_tw_pct" if col.endswith("_pct") else f"{col}_tw"


def same_run_ratio(df, *, baseline: str = "fp32", index=("width", "layout", "batch", "backend")):
    """Tidy ``ratio`` = ``baseline``'s median_ms / each other precision's, per ``index`` row."""
    ok = df[df["status"] == "ok"] if "status" in df else df
    wide = ok.pivot_table(index=list(index), columns="precision", values="median_ms")
    if baseline not in wide:
        raise ValueError(f"no precision == {baseline!r} rows to compare against")
    out = wide.drop(columns=[baseline]).rdiv(wide[baseline], axis=0)
    return out.reset_index().melt(id_vars=list(index), var_name="precision", value_name="ratio")


def sm_coverage(waves):
    """Share of block slots filled over a kernel's waves: ``waves / ceil(waves)`` (2.1 -> 0.70)."""
    import numpy as np

    w = np.asarray(waves, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(w > 0, w / np.ceil(w), np.nan)
    return out if out.ndim else float(out)


def layer_view(kernels, by=("layer", "module_type", "stage")):
    """Per group: kernels, time and its share (per config when grouped by it), time-weighted
    occupancy, tensor-pipe use, waves and SM coverage, main limiter, tensor-core time share."""
    import pandas as pd

    df = with_kernel_class(kernels)
    waves = next((c for c in ("waves", "waves_per_sm") if c in df), None)  # Kineto / ncu name
    df = df.assign(
        _cov=sm_coverage(df[waves]) if waves else float("nan"),
        _tc=df["kernel_class"].str.startswith("tensor_core").astype(float),
    )
    cols = [c for c in (*OCCUPANCY_COLUMNS, "est_occupancy_pct", "tensor_pipe_pct") if c in df]
    cols += [c for c in ("waves", "waves_per_sm") if c in df]
    out = time_weighted(df, list(by), tuple(cols) + ("_cov", "_tc"))
    out = out.rename(columns={"_cov_tw": "sm_coverage_tw", "_tc_tw": "tensor_core_time_share"})
    within = [c for c in by if c == "config"]
    total = out.groupby(within).time_us.transform("sum") if within else out.time_us.sum()
    out["time_share"] = out.time_us / total
    if "limiter" in df:
        lim = (
            df.groupby([*by, "limiter"], observed=True)["duration_us"]
            .sum()
            .reset_index()
            .sort_values("duration_us")
            .drop_duplicates(list(by), keep="last")
            .rename(columns={"limiter": "main_limiter"})
            .drop(columns="duration_us")
        )
        out = out.merge(lim, on=list(by), how="left")
    return pd.DataFrame(out)

"""Derived views over per-kernel tables: time-weighted occupancy per group, ready for heatmaps."""

from __future__ import annotations

from yolo_sm.analyse.kernels import add_kernel_class

#: the occupancy an Nsight Compute table measures per kernel: what its occupancy views read (a
#: pass that measured throughput metrics only holds no achieved occupancy)
OCCUPANCY_COLUMNS = ("theoretical_occupancy_pct", "achieved_occupancy_pct")


def weighted_mean(values, weights) -> float:
    """Mean of ``values`` weighted by ``weights`` (pandas Series): rows without a value are left
    out rather than diluting the mean; NaN when no weight remains."""
    ok = values.notna()
    w = weights[ok]
    return float((values[ok] * w).sum() / w.sum()) if w.sum() > 0 else float("nan")


def time_weighted(
    df,
    by,
    cols=OCCUPANCY_COLUMNS,
    time_col: str = "duration_us",
):
    """Per group of ``by``: kernel count, total time (us), and each of ``cols`` averaged with
    kernel time as the weight (a 1 us kernel at 100 % should not count like a 1 ms one)."""
    import pandas as pd

    by = [by] if isinstance(by, str) else list(by)

    def agg(g):
        w = g[time_col]
        row = {"kernels": len(g), "time_us": w.sum()}
        for c in cols:
            tw = weighted_mean(g[c], w)  # kernels without the value do not dilute the average
            row[_tw_name(c)] = tw
        return pd.Series(row)

    if df.empty:  # no group: apply() would return no aggregate columns at all
        named = [_tw_name(c) for c in cols]
        return pd.DataFrame(columns=[*by, "kernels", "time_us", *named]).astype({"kernels": int})
    out = df.groupby(by, observed=True)[[time_col, *cols]].apply(agg).reset_index()
    out["kernels"] = out["kernels"].astype(int)
    return out


def _tw_name(col: str) -> str:
    """The column :func:`time_weighted` names ``col``'s mean (``x_pct`` -> ``x_tw_pct``)."""
    return f"{col.removesuffix('_pct')}_tw_pct" if col.endswith("_pct") else f"{col}_tw"


def same_run_ratio(
    df,
    *,
    column: str = "precision",
    baseline: str = "fp32",
    value: str = "median_ms",
    index=("width", "layout", "batch", "backend"),
):
    """For each row of ``index``, ``value`` of the baseline over each other ``column`` value,
    measured in the same sweep (a speed-up when ``value`` is a latency). Tidy output with
    ``ratio`` = baseline / other."""
    ok = df[df["status"] == "ok"] if "status" in df else df
    wide = ok.pivot_table(index=list(index), columns=column, values=value)
    if baseline not in wide:
        raise ValueError(f"no {column} == {baseline!r} rows to compare against")
    out = wide.drop(columns=[baseline]).rdiv(wide[baseline], axis=0)
    return out.reset_index().melt(id_vars=list(index), var_name=column, value_name="ratio")


def sm_coverage(waves):
    """Fraction of the block slots a kernel fills over its waves, if every wave takes as long:
    ``waves / ceil(waves)``. 2.1 waves -> 0.70 (the third wave runs a tenth full); under one
    wave, the fraction of SM slots ever used. Works on scalars and pandas Series."""
    import numpy as np

    w = np.asarray(waves, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(w > 0, w / np.ceil(w), np.nan)
    return out if out.ndim else float(out)


def layer_view(kernels, by=("layer", "module_type", "stage"), time_col: str = "duration_us"):
    """Per group (default: per layer): kernels, time and its share of the total, time-weighted
    theoretical / achieved / Kineto-estimated occupancy and tensor-pipe use where present, mean
    waves, SM coverage (:func:`sm_coverage`, time-weighted), the limiter holding most of the
    time, and the tensor-core share of the time. ``time_share`` is the group's share of its
    config's time when ``by`` holds "config", else of the whole table. Tidy, ready for heatmaps."""
    import pandas as pd

    df = kernels if "kernel_class" in kernels else add_kernel_class(kernels)
    waves = next((c for c in ("waves", "waves_per_sm") if c in df), None)  # Kineto / ncu name
    df = df.assign(
        _cov=sm_coverage(df[waves]) if waves else float("nan"),
        _tc=df["kernel_class"].str.startswith("tensor_core").astype(float),
    )
    cols = [
        c
        for c in (
            "theoretical_occupancy_pct",
            "achieved_occupancy_pct",
            "est_occupancy_pct",
            "tensor_pipe_pct",
            "waves",
            "waves_per_sm",
        )
        if c in df
    ]
    out = time_weighted(df, list(by), tuple(cols) + ("_cov", "_tc"), time_col)
    out = out.rename(columns={"_cov_tw": "sm_coverage_tw", "_tc_tw": "tensor_core_time_share"})
    # share of its config's time when grouped per config, else of the whole table
    within = [c for c in by if c == "config"]
    total = out.groupby(within).time_us.transform("sum") if within else out.time_us.sum()
    out["time_share"] = out.time_us / total
    if "limiter" in df:
        lim = (
            df.groupby([*by, "limiter"], observed=True)[time_col]
            .sum()
            .reset_index()
            .sort_values(time_col)
            .drop_duplicates(list(by), keep="last")
            .rename(columns={"limiter": "main_limiter"})
            .drop(columns=time_col)
        )
        out = out.merge(lim, on=list(by), how="left")
    return pd.DataFrame(out)

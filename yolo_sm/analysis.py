"""Derived views over per-kernel tables: time-weighted occupancy per group, ready for heatmaps."""

from __future__ import annotations


def time_weighted(
    df,
    by,
    cols=("theoretical_occupancy_pct", "achieved_occupancy_pct"),
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
            row[f"{c.removesuffix('_pct')}_tw_pct" if c.endswith("_pct") else f"{c}_tw"] = (
                (g[c] * w).sum() / w.sum() if w.sum() > 0 else float("nan")
            )
        return pd.Series(row)

    out = df.groupby(by, observed=True)[[time_col, *cols]].apply(agg).reset_index()
    out["kernels"] = out["kernels"].astype(int)
    return out

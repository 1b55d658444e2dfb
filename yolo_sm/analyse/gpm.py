"""NVML GPM tables: the metric order, one row per window, medians per run, sampler overhead."""

from __future__ import annotations

# the order tables and figures show them in
SUMMARY_METRICS = ("sm_util_pct", "sm_occupancy_pct", "tensor_util_pct", "dram_bw_util_pct")
FALLBACK_METRICS = ("gpu_util_pct", "mem_util_pct")  # nvmlUtilization_t .gpu / .memory


def wide(df):
    """One row per window, the metrics as columns (markers and window columns kept)."""
    keys = [c for c in df.columns if c not in ("metric", "value")]
    out = df.set_index([*keys, "metric"])["value"].unstack("metric").reset_index()
    out.columns.name = None
    return out


def run_medians(df, by=("config",)):
    """Per group of ``by``: the median of each metric over the windows marked ``phase="run"``,
    windows that straddle a marker change left out, and ``windows``, how many there were."""
    w = wide(df)
    run = w[(w["phase"] == "run") & ~w["straddles_mark"].astype(bool)]
    metrics = [m for m in (*SUMMARY_METRICS, *FALLBACK_METRICS) if m in run]
    g = run.groupby(list(by))
    out = g[metrics].median()
    out["windows"] = g.size()
    return out.reset_index()


def overhead_pct(df) -> float:
    """Median over rounds of the throughput lost with the sampler on, in percent of the same
    round's throughput with it off (paired rounds cancel slow drifts of clock or host load)."""
    on = df[df.sampler].set_index("round").img_per_s
    off = df[~df.sampler].set_index("round").img_per_s
    return float(100.0 * (1.0 - (on / off).median()))

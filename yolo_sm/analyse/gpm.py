"""NVML GPM tables: the metric order, one row per window, medians per run, sampler overhead."""

from __future__ import annotations

from yolo_sm.contract.labels import with_config

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
    """Per group of ``by``: each metric's median over the ``run`` windows not straddling a
    marker change, and their count ``windows``."""
    w = wide(df)
    run = w[(w["phase"] == "run") & ~w["straddles_mark"].astype(bool)]
    metrics = [m for m in (*SUMMARY_METRICS, *FALLBACK_METRICS) if m in run]
    g = run.groupby(list(by))
    out = g[metrics].median()
    out["windows"] = g.size()
    return out.reset_index()


def overhead_pct(df) -> float:
    """Median over paired rounds of the throughput (%) lost with the sampler on."""
    on = df[df.sampler].set_index("round").img_per_s
    off = df[~df.sampler].set_index("round").img_per_s
    return float(100.0 * (1.0 - (on / off).median()))


def gpm_wide(gpm):
    """:func:`wide` without provenance, config parsed, ``t0_s`` the window's start."""
    w = wide(_measured(gpm)).sort_values("t_s").reset_index(drop=True)
    w["config"] = w["config"].fillna("")
    w = with_config(w)
    return w.assign(t0_s=w["t_s"] - w["window_s"])


def _measured(gpm):
    return gpm.loc[:, ~gpm.columns.str.startswith("prov_")]


def gpm_medians(gpm):
    """:func:`run_medians` per config (%), sorted by width then batch."""
    med = run_medians(_measured(gpm))
    metrics = [m for m in SUMMARY_METRICS if m in med]
    out = with_config(med)[["config", "width", "batch", *metrics, "windows"]]
    out = out.sort_values(["width", "batch"]).reset_index(drop=True)
    return out.astype({"batch": int})


def gpm_overhead_table(overhead):
    """Per config: rounds, sampling rate (Hz), img/s without the sampler, throughput lost (%)."""
    import pandas as pd

    rows = {
        config: {
            "rounds": g["round"].nunique(),
            "hz": g.hz.iloc[0],
            "img_per_s_without": g[~g.sampler].img_per_s.median(),
            "throughput_lost_pct": overhead_pct(g),
        }
        for config, g in overhead.groupby("config")
    }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("config")

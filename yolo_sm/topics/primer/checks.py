"""Checks of the occupancy primer (notebook 00): the occupancy calculator against Nsight
Compute's theoretical occupancy on every distinct launch shape, and Kineto's estimated
occupancy against the calculator and against Nsight Compute's measurement.

Occupancy in percent; times in microseconds.
"""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact
from yolo_sm.analyse.occupancy import ARCH, theoretical_occupancy
from yolo_sm.analyse.weighting import weighted_mean
from yolo_sm.contract.datasets import DataRoot

LAUNCH_COLUMNS = ["block_size", "registers_per_thread", "shared_mem_per_block_bytes"]
TRACE = "trace_width_b8"


def time_weighted(df, col: str, weight: str = "duration_us") -> float:
    """``col`` averaged over all of ``df`` with kernel time as the weight."""
    return weighted_mean(df[col], df[weight])


def compute_capability(root: DataRoot, ncu: pd.DataFrame | None = None) -> str | None:
    """The GPU's compute capability from the root's provenance (or the ``ncu`` rows), when
    the calculator knows it; None otherwise (a CPU root)."""
    cc = str(root.machine().get("compute_capability", "")).split(", ")[0]
    if not cc and ncu is not None and "prov_compute_capability" in ncu:
        cc = str(ncu.prov_compute_capability.dropna().astype(str).iloc[0]) if len(ncu) else ""
    return cc if cc in ARCH else None


def kineto_summary(trace: pd.DataFrame) -> pd.DataFrame:
    """Per config of a PyTorch profiler kernel table (first iteration): kernels, kernel time
    (us), Kineto's estimated and the calculator's theoretical occupancy (time-weighted, %)."""
    fwd = trace[trace.iteration == trace.iteration.min()]
    rows = [
        {
            "config": c,
            "kernels": len(g),
            "time_us": g.duration_us.sum(),
            "est_occupancy_tw_pct": time_weighted(g, "est_occupancy_pct"),
            "theoretical_occupancy_tw_pct": time_weighted(g, "theoretical_occupancy_pct"),
        }
        for c, g in fwd.groupby("config", sort=False)
    ]
    return pd.DataFrame(rows)


LAYER_ESTIMATE_COLUMNS = [
    "config",
    "layer",
    "module_type",
    "kineto_theoretical_occupancy_tw_pct",
    "est_occupancy_tw_pct",
    "ncu_achieved_occupancy_tw_pct",
    "ncu_time_us",
]


def layer_estimates(layers: pd.DataFrame) -> pd.DataFrame:
    """The per-layer join (``profile_layers``): Kineto's theoretical and estimated occupancy
    next to ncu's achieved occupancy and time, one row per (config, layer)."""
    return layers[[c for c in LAYER_ESTIMATE_COLUMNS if c in layers]].reset_index(drop=True)


def calculator_mismatches(ncu: pd.DataFrame, cc: str, tolerance: float = 0.01) -> pd.DataFrame:
    """The distinct launch shapes of ``ncu`` with Nsight Compute's theoretical occupancy and
    the calculator's (``calculator_pct``) on compute capability ``cc``, and ``mismatch``
    (they differ by ``tolerance`` percentage points or more)."""
    u = ncu.drop_duplicates(LAUNCH_COLUMNS + ["theoretical_occupancy_pct"])[
        LAUNCH_COLUMNS + ["theoretical_occupancy_pct"]
    ].reset_index(drop=True)
    u["calculator_pct"] = [
        theoretical_occupancy(cc, int(b), int(r), int(s)).occupancy_pct
        for b, r, s in u[LAUNCH_COLUMNS].itertuples(index=False)
    ]
    u["mismatch"] = (u.calculator_pct - u.theoretical_occupancy_pct).abs() >= tolerance
    return u


def calculator_facts(root: DataRoot, tables) -> list[dict]:
    """``calculator_mismatch_share`` (%) over the distinct launch shapes of the Nsight Compute
    ``tables`` the root holds (the note counts them)."""
    names = [n for n in tables if root.has(n)]
    if not names:
        return []
    ncu = pd.concat([root.load(n) for n in names], ignore_index=True)
    cc = compute_capability(root, ncu)
    if cc is None:
        return []
    m = calculator_mismatches(ncu, cc)
    return [
        fact(
            "calculator_mismatch_share",
            100 * m.mismatch.mean() if len(m) else math.nan,
            "%",
            datasets=names,
            note=f"of {len(m)} distinct launch shapes, where the calculator differs from ncu",
        ),
    ]

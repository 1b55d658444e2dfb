"""What the host decides of a forward (notebook 08): time, the launching thread's CPU time,
launches and GPU busy time per sweep point, and the host CPU."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot

PREFIX = "hosts."
SWEEP = "sweep_fp16_nhwc"
#: the columns a sweep row carries when the host's share was measured
HOST_COLUMNS = ("host_cpu_ms", "launches_per_forward", "gpu_busy_ms", "host_bound")
#: the columns of :func:`small_batch_view`
VIEW_COLUMNS = ("width", "batch", "median_ms", "mean_ms", "host_cpu_ms", "cpu_over_forward",
                "launches_per_forward", "gpu_busy_ms", "gpu_busy_pct", "us_per_launch",
                "host_bound")  # fmt: skip


def host_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """One row per ``ok`` point with host columns: CPU time per forward and over the mean
    forward, launches, GPU busy ms and %, us per launch, host-bound, CPU; empty without them."""
    if not all(c in sweep for c in HOST_COLUMNS) or sweep.gpu_busy_ms.isna().all():
        return pd.DataFrame(columns=[*VIEW_COLUMNS, "backend", "cpu_model", "cpu_count"])
    ok = sweep[(sweep.status == "ok") & sweep.gpu_busy_ms.notna()]
    keys = ["width", "precision", "layout", "backend", "batch", "median_ms", "host_cpu_ms",
            "launches_per_forward", "gpu_busy_ms"]  # fmt: skip
    out = (
        ok[keys]
        .astype({c: float for c in keys[5:]})
        .assign(
            mean_ms=ok.get("mean_ms", ok.median_ms).astype(float),
            host_bound=ok.host_bound.astype("boolean").fillna(False).astype(bool),
            cpu_model=ok.get("prov_cpu_model", pd.Series("", index=ok.index)).astype(str),
            cpu_count=ok.get("prov_cpu_count", pd.Series(math.nan, index=ok.index)),
        )
    )
    out["cpu_over_forward"] = out.host_cpu_ms / out.mean_ms
    out["gpu_busy_pct"] = 100 * (out.gpu_busy_ms / out.median_ms).clip(upper=1)
    out["us_per_launch"] = 1e3 * out.host_cpu_ms / out.launches_per_forward
    return out.sort_values(["backend", "width", "batch"]).reset_index(drop=True)


def small_batch_view(table: pd.DataFrame, backend: str = "eager") -> pd.DataFrame:
    """``backend``'s rows at its smallest batch, :data:`VIEW_COLUMNS`."""
    rows = table[table.backend == backend]
    return rows[rows.batch == rows.batch.min()].reindex(columns=list(VIEW_COLUMNS))


def cpu_of(table: pd.DataFrame) -> str:
    """The host CPU(s) of the table's points ("" if unknown)."""
    models = [m for m in dict.fromkeys(table.cpu_model.astype(str)) if m and m != "nan"]
    counts = sorted({int(c) for c in pd.to_numeric(table.cpu_count, errors="coerce").dropna()})
    text = ", ".join(models)
    return f"{text} ({', '.join(map(str, counts))} logical CPUs)" if text and counts else text


def host_bound_edge(table: pd.DataFrame, backend: str = "eager") -> pd.DataFrame:
    """Per width: the largest host-bound batch and the smallest GPU-bound one."""
    g = table[table.backend == backend].groupby("width")
    return pd.DataFrame({
        "largest_host_bound_batch": g.apply(lambda d: d.batch[d.host_bound].max()),
        "smallest_gpu_bound_batch": g.apply(lambda d: d.batch[~d.host_bound].min()),
    }).reset_index()  # fmt: skip


#: the facts a rule reads
KEYS = ("eager_b1_host_bound_share_pct", "eager_b1_cpu_over_forward", "graph_max_gpu_idle_pct")
FACT_KEYS = frozenset(PREFIX + k for k in KEYS)


def facts(root: DataRoot, sweep: str = SWEEP) -> pd.DataFrame:
    """Host facts at eager batch 1 (% of widths host-bound, median CPU over forward) and the
    most any CUDA-graph point leaves the GPU idle (%)."""
    t = host_table(root.load(sweep)) if root.has(sweep) else pd.DataFrame()
    if t.empty:
        return facts_table([])
    ds, graph = (sweep,), t[t.backend == "cudagraph"]
    b1 = t[(t.backend == "eager") & (t.batch == 1)]
    n1, note = len(b1), f"host CPU {cpu_of(t)}"
    return facts_table([
        fact(PREFIX + "eager_b1_host_bound_share_pct", 100 * b1.host_bound.mean(), "%",
             datasets=ds, note=note, points=n1),
        fact(PREFIX + "eager_b1_cpu_over_forward", b1.cpu_over_forward.median(), "x",
             datasets=ds, note=note, points=n1),
        fact(PREFIX + "graph_max_gpu_idle_pct", 100 - graph.gpu_busy_pct.min(), "%",
             datasets=ds, points=len(graph)),
    ])  # fmt: skip

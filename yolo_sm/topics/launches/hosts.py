"""What the host decides of a forward (notebook 08): per point of a sweep measured with the host
columns, the forward's time beside the CPU time of the thread that launches it, the launches it
issues, the GPU's busy time and what that leaves idle, and the host's CPU from provenance.

Nothing here judges: the rules of :mod:`yolo_sm.topics.launches.rules` read :func:`facts`.
"""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot

PREFIX = "hosts."
SWEEP = "sweep_fp16_nhwc"
#: the columns a sweep row carries when the host's share was measured
HOST_COLUMNS = ("host_cpu_ms", "launches_per_forward", "gpu_busy_ms", "host_bound")


def measured(sweep: pd.DataFrame) -> bool:
    """Whether ``sweep`` carries the host columns (tables measured before them do not)."""
    return all(c in sweep for c in HOST_COLUMNS) and sweep["gpu_busy_ms"].notna().any()


def host_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """One row per ``ok`` point with host columns: its keys (width, precision, layout, backend,
    batch), ``median_ms`` (the forward), ``host_cpu_ms`` (CPU time of the launching thread per
    forward), ``launches_per_forward``, ``gpu_busy_ms`` (the kernels' summed time per forward),
    ``gpu_idle_ms`` (the forward's time the GPU ran no kernel, >= 0), ``cpu_share_pct``
    (host_cpu_ms over median_ms), ``gpu_busy_pct``, ``us_per_launch`` (host_cpu_ms per launch,
    microseconds), ``host_launch_us`` (one tiny launch, same process), ``host_bound``,
    ``cpu_model`` and ``cpu_count`` (provenance). Empty for a table without the columns."""
    cols = ["width", "precision", "layout", "backend", "batch", "median_ms", "host_cpu_ms",
            "launches_per_forward", "gpu_busy_ms", "gpu_idle_ms", "cpu_share_pct",
            "gpu_busy_pct", "us_per_launch", "host_launch_us", "host_bound", "cpu_model",
            "cpu_count"]  # fmt: skip
    if not measured(sweep):
        return pd.DataFrame(columns=cols)
    ok = sweep[(sweep["status"] == "ok") & sweep["gpu_busy_ms"].notna()]
    med = ok["median_ms"].astype(float)
    busy = ok["gpu_busy_ms"].astype(float)
    cpu = ok["host_cpu_ms"].astype(float)
    launches = ok["launches_per_forward"].astype(float)
    out = ok.reindex(columns=["width", "precision", "layout", "backend", "batch"]).assign(
        median_ms=med,
        host_cpu_ms=cpu,
        launches_per_forward=launches,
        gpu_busy_ms=busy,
        gpu_idle_ms=(med - busy).clip(lower=0),
        cpu_share_pct=100 * cpu / med,
        gpu_busy_pct=100 * (busy / med).clip(upper=1),
        us_per_launch=1e3 * cpu / launches,
        host_launch_us=ok.get("host_launch_us", pd.Series(math.nan, index=ok.index)),
        host_bound=ok["host_bound"].astype("boolean").fillna(False).astype(bool),
        cpu_model=ok.get("prov_cpu_model", pd.Series("", index=ok.index)).astype(str),
        cpu_count=ok.get("prov_cpu_count", pd.Series(math.nan, index=ok.index)),
    )
    return out.sort_values(["backend", "width", "batch"]).reset_index(drop=True)[cols]


def smallest_batch(table: pd.DataFrame, backend: str = "eager") -> pd.DataFrame:
    """The rows of ``backend`` at its smallest batch (the launch-bound end)."""
    rows = table[table["backend"] == backend]
    return rows[rows["batch"] == rows["batch"].min()] if len(rows) else rows


#: the columns of :func:`small_batch_view` (what varies between widths)
VIEW_COLUMNS = (
    "width", "batch", "median_ms", "host_cpu_ms", "launches_per_forward", "gpu_busy_ms",
    "gpu_idle_ms", "gpu_busy_pct", "us_per_launch", "host_bound",
)  # fmt: skip


def small_batch_view(table: pd.DataFrame, backend: str = "eager") -> pd.DataFrame:
    """:func:`smallest_batch` narrowed to :data:`VIEW_COLUMNS` (the host's CPU is the same for
    every row: :func:`cpu_of` names it)."""
    return smallest_batch(table, backend).reindex(columns=list(VIEW_COLUMNS))


def cpu_of(table: pd.DataFrame) -> str:
    """The host CPU(s) the table's points were measured on, from provenance ("" if unknown)."""
    models = [m for m in dict.fromkeys(table["cpu_model"].astype(str)) if m and m != "nan"]
    counts = sorted({int(c) for c in pd.to_numeric(table["cpu_count"], errors="coerce").dropna()})
    text = ", ".join(models)
    return f"{text} ({', '.join(map(str, counts))} logical CPUs)" if text and counts else text


def host_bound_edge(table: pd.DataFrame, backend: str = "eager") -> pd.DataFrame:
    """Per width, the largest batch at which ``backend`` is still host-bound (NaN where no
    batch is) and the smallest batch at which it is not."""
    rows = []
    for w, g in table[table["backend"] == backend].groupby("width"):
        hb, free = g[g["host_bound"]], g[~g["host_bound"]]
        rows.append(
            {
                "width": w,
                "largest_host_bound_batch": hb["batch"].max() if len(hb) else math.nan,
                "smallest_gpu_bound_batch": free["batch"].min() if len(free) else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=["width", "largest_host_bound_batch",
                                       "smallest_gpu_bound_batch"])  # fmt: skip


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    hosts.eager_small_cpu_share_pct hosts.eager_small_host_bound_share_pct
    hosts.graph_host_bound_share_pct
    """.split()
)


def facts(root: DataRoot, sweep: str = SWEEP) -> pd.DataFrame:
    """Facts of the host's share (keys prefixed with :data:`PREFIX`; left out where ``root``
    lacks ``sweep`` or its host columns; unscoped): at eager's smallest batch (the note names it)
    ``eager_small_host_bound_share_pct`` (% of widths host-bound), ``eager_small_cpu_share_pct``
    (median over widths of the launching thread's CPU time over the forward's), ``eager_small_
    gpu_idle_pct`` (median share of the forward with no kernel running),
    ``eager_small_us_per_launch`` (median CPU time per launch) and
    ``eager_small_launches_per_forward`` (median); over the whole sweep
    ``graph_host_bound_share_pct`` (% of CUDA-graph points host-bound) and
    ``eager_largest_host_bound_batch`` (the largest eager batch host-bound at any width)."""
    if not root.has(sweep):
        return facts_table([])
    t = host_table(root.load(sweep))
    if t.empty:
        return facts_table([])
    ds, rows = (sweep,), []
    small = smallest_batch(t)
    if len(small):
        note = f"batch {int(small['batch'].iloc[0])}; host CPU {small['cpu_model'].iloc[0]}"
        for key, value, unit in (
            ("eager_small_host_bound_share_pct", 100 * small["host_bound"].mean(), "%"),
            ("eager_small_cpu_share_pct", small["cpu_share_pct"].median(), "%"),
            ("eager_small_gpu_idle_pct", 100 - small["gpu_busy_pct"].median(), "%"),
            ("eager_small_us_per_launch", small["us_per_launch"].median(), "us"),
            ("eager_small_launches_per_forward", small["launches_per_forward"].median(), ""),
        ):
            rows.append(fact(PREFIX + key, value, unit, datasets=ds, note=note))
    graph = t[t["backend"] == "cudagraph"]
    if len(graph):
        share = 100 * graph["host_bound"].mean()
        rows.append(fact(PREFIX + "graph_host_bound_share_pct", share, "%", datasets=ds))
    edge = host_bound_edge(t)
    if len(edge):
        top = edge["largest_host_bound_batch"].max()
        rows.append(fact(PREFIX + "eager_largest_host_bound_batch", top, "images", datasets=ds))
    return facts_table(rows)

"""A root collected on N GPUs (``yolo-sm collect --workers N``) against the same steps on one:
wall time, each point's value over the one-GPU run's (host-bound points left out), rows."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.schema import COLLECT_TASKS, KEY_COLUMNS

# fmt: off

PREFIX = "multi_gpu."
#: per table kind compared: its key columns, and the value compared per point
KEYS = {
    "sweep": tuple(KEY_COLUMNS), "bench": ("family", "width", "batch", "variant"),
    "ncu": ("config",),
}
VALUE = {"sweep": "img_per_s", "bench": "img_per_s", "ncu": "duration_us"}
RUN_COLUMNS = ("run", "run_started_utc", "workers", "wall_s", "tasks", "task_s", "gpus")
FACT_KEYS = frozenset(
    f"{PREFIX}{k}" for k in ("gpu_median_spread_pct", "scaling_efficiency", "table_mismatches")
)


def runs(tasks: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a task log: workers, wall s, tasks, summed task s, GPUs used."""
    if tasks.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    g = tasks.groupby("run", sort=False)
    gpus = g.gpu_uuid.nunique() if "gpu_uuid" in tasks else 0
    out = pd.DataFrame(
        {
            "run_started_utc": g.run_started_utc.first(), "workers": g.workers.max(),
            "wall_s": g.run_wall_s.max(), "tasks": g.size(), "task_s": g.seconds.sum(),
            "gpus": gpus,
        }
    )
    return out.reset_index()[list(RUN_COLUMNS)]


def scaling(multi_tasks: pd.DataFrame, single_tasks: pd.DataFrame) -> pd.DataFrame:
    """One row: N GPUs, each root's wall s, ``speedup`` (single / multi), ``efficiency``
    (speed-up / N), ``busy_share`` (task s over N x wall) and each root's done units."""
    m, s = runs(multi_tasks), runs(single_tasks)
    if m.empty or s.empty:
        return pd.DataFrame()
    n, wall_m, wall_s = int(m.workers.max()), float(m.wall_s.sum()), float(s.wall_s.sum())
    speedup = wall_s / wall_m if wall_m > 0 else float("nan")
    return pd.DataFrame(
        [
            {
                "gpus": n, "multi_wall_s": wall_m, "single_wall_s": wall_s, "speedup": speedup,
                "efficiency": speedup / n,
                "busy_share": float(m.task_s.sum()) / (n * wall_m) if wall_m > 0 else None,
                "multi_units": int((multi_tasks.state == "done").sum()),
                "single_units": int((single_tasks.state == "done").sum()),
            }
        ]
    )


def _points(table: pd.DataFrame, kind: str) -> pd.DataFrame:
    keys, value = list(KEYS[kind]), VALUE[kind]
    d = table[table.status == "ok"] if "status" in table else table
    if "host_bound" in d:
        d = d[~d.host_bound.fillna(False).astype(bool)]
    place = [c for c in ("gpu_uuid", "gpu_index") if c in d]
    if kind == "ncu":
        d = d.groupby(keys, as_index=False).agg({value: "sum", **dict.fromkeys(place, "first")})
    return d[keys + [value] + place]


def point_ratios(multi: pd.DataFrame, single: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Per point both measured: multi's value over single's (``ratio``; above 1 the multi
    root's GPU was faster), with the GPU that measured it in ``multi``."""
    keys, value = list(KEYS[kind]), VALUE[kind]
    j = _points(multi, kind).merge(
        _points(single, kind)[keys + [value]], on=keys, suffixes=("_multi", "_single")
    )
    num, den = j[f"{value}_multi"], j[f"{value}_single"]
    j["ratio"] = den / num if kind == "ncu" else num / den
    return j[keys + [c for c in ("gpu_uuid", "gpu_index") if c in j] + ["ratio"]]


def shared_tables(multi: DataRoot, single: DataRoot) -> list[tuple]:
    """(dataset, kind, multi's table, single's table) of each comparable table both hold."""
    out = []
    for name in multi.names():
        kind = multi.info(name).get("kind")
        if kind in KEYS and single.has(name) and single.info(name).get("kind") == kind:
            out.append((name, kind, multi.load(name), single.load(name)))
    return out


def all_ratios(shared) -> pd.DataFrame:
    """:func:`point_ratios` of every :func:`shared_tables` entry: dataset, GPU, ratio."""
    cols = ["dataset", "gpu_uuid", "gpu_index", "ratio"]
    parts = [point_ratios(a, b, k).assign(dataset=n) for n, k, a, b in shared]
    return (
        pd.concat(parts, ignore_index=True).reindex(columns=cols)
        if parts
        else pd.DataFrame(columns=cols)
    )


def gpu_spread(ratios: pd.DataFrame) -> pd.DataFrame:
    """Per GPU of the multi root: points and the ratio's median, quartiles, min and max."""
    r = ratios.dropna(subset=["ratio", "gpu_uuid"])
    g = r.groupby("gpu_uuid").ratio
    out = pd.DataFrame(
        {
            "gpu_index": r.groupby("gpu_uuid").gpu_index.first(), "points": g.size(),
            "median": g.median(), "p25": g.quantile(0.25), "p75": g.quantile(0.75), "min": g.min(),
            "max": g.max(),
        }
    )
    return out.reset_index().sort_values("gpu_index", ignore_index=True)


def key_match(multi: pd.DataFrame, single: pd.DataFrame, kind: str) -> dict:
    """Rows of each table, rows only one holds (an ncu table's kernels by config, launch order
    and name) and rows whose status differs."""
    keys = list(KEYS[kind])
    if kind == "ncu":
        multi, single = (d.assign(launch=d.groupby("config").cumcount()) for d in (multi, single))
        keys = ["config", "launch", "kernel_name"]
    a, b = (
        d[keys + (["status"] if "status" in d else [])].drop_duplicates(keys)
        for d in (multi, single)
    )
    j = a.merge(b, on=keys, how="outer", indicator=True, suffixes=("_multi", "_single"))
    both = j[j._merge == "both"]
    differs = int((both.status_multi != both.status_single).sum()) if "status_multi" in j else 0
    return {
        "rows_multi": len(a), "rows_single": len(b),
        "only_multi": int((j._merge == "left_only").sum()),
        "only_single": int((j._merge == "right_only").sum()), "status_differs": differs,
    }


def tables_match(shared) -> pd.DataFrame:
    """:func:`key_match` per shared table, with ``mismatches`` (only one holds + status)."""
    out = pd.DataFrame([{"dataset": n, **key_match(a, b, k)} for n, k, a, b in shared])
    if len(out):
        out["mismatches"] = out.only_multi + out.only_single + out.status_differs
    return out


def workers(root: DataRoot) -> int:
    """The most workers a run of ``root``'s task log had (0 without one)."""
    tasks = root.load(COLLECT_TASKS) if root.has(COLLECT_TASKS) else None
    return int(tasks.workers.max()) if tasks is not None and len(tasks) else 0


def pair_facts(multi: DataRoot, single: DataRoot) -> pd.DataFrame:
    """Scaling efficiency, per-GPU median spread (%) and table mismatches of a multi-GPU root."""
    rows = []
    if workers(multi) < 2:
        return facts_table(rows)
    if single.has(COLLECT_TASKS):
        sc = scaling(multi.load(COLLECT_TASKS), single.load(COLLECT_TASKS))
        if len(sc):
            rows.append(
                fact(
                    PREFIX + "scaling_efficiency", sc.efficiency.iloc[0], datasets=(COLLECT_TASKS,),
                    note=f"{sc.gpus.iloc[0]} GPUs",
                )
            )
    shared = shared_tables(multi, single)
    if shared:
        ds = tuple(n for n, *_ in shared)
        spread = gpu_spread(all_ratios(shared))
        if len(spread) >= 2:
            pct = 100 * (spread["median"].max() / spread["median"].min() - 1)
            rows.append(
                fact(
                    PREFIX + "gpu_median_spread_pct", pct, "%", datasets=ds,
                    note=f"{len(spread)} GPUs, {int(spread.points.sum())} points",
                )
            )
        mismatches = float(tables_match(shared).mismatches.sum())
        rows.append(fact(PREFIX + "table_mismatches", mismatches, "rows", datasets=ds))
    return facts_table(rows)


def facts(a: DataRoot, b: DataRoot) -> pd.DataFrame:
    """:func:`pair_facts` with the root collected on two GPUs or more as ``multi``."""
    multi, single = (b, a) if workers(a) < 2 <= workers(b) else (a, b)
    return pair_facts(multi, single)

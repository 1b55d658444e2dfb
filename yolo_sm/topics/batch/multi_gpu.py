"""Collecting on several GPUs of one host against one GPU: two roots collected with the same plan
steps, ``multi`` by ``yolo-sm collect --workers N`` and ``single`` by ``--workers 1`` on one GPU
of the same host (docs/distributed.md). Every function takes tables and returns tables or
facts; none judges (the rules are in :mod:`yolo_sm.topics.batch.multi_gpu_rules`).

* **Wall time** comes from each root's task log (``collect_tasks``, one row per task with its
  run's wall seconds): a root collected over several runs (a resumed plan) sums its runs.
  Speed-up = single wall / multi wall, scaling efficiency = speed-up / N.
* **Do the GPUs measure alike?** Each point runs once in each root: on one of the N GPUs in
  ``multi`` and on the one GPU in ``single``. Per point the ratio of the two (img/s, or for an
  Nsight Compute table the inverse of the forward's summed kernel time), grouped by the GPU
  that measured it in ``multi``: a GPU whose median ratio sits apart from the others' measures
  differently. Host-bound points (``host_bound``) are left out: the N workers share the host's
  cores, so their speed is the host's share, not the GPU's.
* **Same tables?** The rows of each table both roots hold, compared on their key columns and
  status: a row only one root holds, or whose status differs, is a mismatch.
"""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.schema import COLLECT_TASKS, KEY_COLUMNS

#: the prefix of every fact key of this module
PREFIX = "multi_gpu."
#: per table kind compared: the key columns of a row and the value compared per point (an
#: Nsight Compute table is summed per config first: GPU time per profiled forward)
KEYS = {
    "sweep": tuple(KEY_COLUMNS),
    "bench": ("family", "width", "batch", "variant"),
    "ncu": ("config",),
}
VALUE = {"sweep": "img_per_s", "bench": "img_per_s", "ncu": "duration_us"}
RUN_COLUMNS = ("run", "run_started_utc", "workers", "wall_s", "tasks", "task_s", "gpus")
SPREAD_COLUMNS = ("gpu_uuid", "gpu_index", "points", "median", "p25", "p75", "min", "max")


def runs(tasks: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a task log: its workers, wall seconds, tasks, the summed task
    seconds (``task_s``) and how many GPUs ran them."""
    if tasks.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    g = tasks.groupby("run", sort=False)
    out = pd.DataFrame(
        {
            "run_started_utc": g["run_started_utc"].first(),
            "workers": g["workers"].max(),
            "wall_s": g["run_wall_s"].max(),
            "tasks": g.size(),
            "task_s": g["seconds"].sum(),
            "gpus": g["gpu_uuid"].nunique() if "gpu_uuid" in tasks else 0,
        }
    )
    return out.reset_index()[list(RUN_COLUMNS)]


def scaling(multi_tasks: pd.DataFrame, single_tasks: pd.DataFrame) -> pd.DataFrame:
    """One row: the N GPUs of ``multi`` (its runs' most workers) against one, each root's wall
    seconds (its runs summed), ``speedup`` (single over multi), ``efficiency`` (speed-up / N),
    ``busy_share`` (the multi root's task seconds over N x its wall: how much of the time its
    GPUs had a task) and each root's units (tasks that ended done)."""
    m, s = runs(multi_tasks), runs(single_tasks)
    if m.empty or s.empty:
        return pd.DataFrame()
    n = int(m.workers.max())
    wall_m, wall_s = float(m.wall_s.sum()), float(s.wall_s.sum())
    speedup = wall_s / wall_m if wall_m > 0 else float("nan")
    return pd.DataFrame(
        [
            {
                "gpus": n,
                "multi_wall_s": wall_m,
                "single_wall_s": wall_s,
                "speedup": speedup,
                "efficiency": speedup / n,
                "busy_share": float(m.task_s.sum()) / (n * wall_m) if wall_m > 0 else None,
                "multi_units": int((multi_tasks.state == "done").sum()),
                "single_units": int((single_tasks.state == "done").sum()),
            }
        ]
    )


def _points(table: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The ok, not host-bound rows of a table as (keys..., value, gpu_uuid, gpu_index)."""
    keys, value = list(KEYS[kind]), VALUE[kind]
    d = table
    if "status" in d:
        d = d[d["status"] == "ok"]
    if "host_bound" in d:
        d = d[~d["host_bound"].fillna(False).astype(bool)]
    place = [c for c in ("gpu_uuid", "gpu_index") if c in d]
    if kind == "ncu":
        agg = {value: "sum", **{c: "first" for c in place}}
        d = d.groupby(keys, as_index=False).agg(agg)
    return d[keys + [value] + place]


def point_ratios(multi: pd.DataFrame, single: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Per point both tables measured: the multi root's value over the single root's
    (``ratio``; for an ncu table the single root's kernel time over the multi root's, so that
    above 1 the multi root's GPU was faster everywhere), with the GPU that measured it in
    ``multi``."""
    keys = list(KEYS[kind])
    a, b = _points(multi, kind), _points(single, kind)
    value = VALUE[kind]
    j = a.merge(b[keys + [value]], on=keys, suffixes=("_multi", "_single"))
    num, den = j[f"{value}_multi"], j[f"{value}_single"]
    j["ratio"] = den / num if kind == "ncu" else num / den
    cols = keys + [c for c in ("gpu_uuid", "gpu_index") if c in j] + ["ratio"]
    return j[cols]


def compared(multi: DataRoot, single: DataRoot) -> list[tuple[str, str]]:
    """(dataset, kind) of the tables both roots hold that this module compares."""
    out = []
    for name in multi.names():
        kind = multi.info(name).get("kind")
        if kind in KEYS and single.has(name) and single.info(name).get("kind") == kind:
            out.append((name, kind))
    return out


def shared_tables(multi: DataRoot, single: DataRoot) -> list[tuple]:
    """(dataset, kind, multi's table, single's table) of every table :func:`compared` names,
    each loaded once."""
    return [(n, k, multi.load(n), single.load(n)) for n, k in compared(multi, single)]


def all_ratios(multi: DataRoot, single: DataRoot, shared=None) -> pd.DataFrame:
    """:func:`point_ratios` of every table both roots hold (``dataset``, ``gpu_uuid``,
    ``gpu_index``, ``ratio``; the keys left out, as they differ by kind); ``shared``: their
    :func:`shared_tables`, where the caller has loaded them."""
    parts = [
        point_ratios(a, b, kind).assign(dataset=name)
        for name, kind, a, b in (shared_tables(multi, single) if shared is None else shared)
    ]
    cols = ["dataset", "gpu_uuid", "gpu_index", "ratio"]
    if not parts:
        return pd.DataFrame(columns=cols)
    return pd.concat(parts, ignore_index=True).reindex(columns=cols)


def gpu_spread(ratios: pd.DataFrame) -> pd.DataFrame:
    """Per GPU of the multi root: points, the median ratio to the single root and its
    quartiles (``p25``, ``p75``), lowest and highest."""
    r = ratios.dropna(subset=["ratio", "gpu_uuid"])
    if r.empty:
        return pd.DataFrame(columns=list(SPREAD_COLUMNS))
    g = r.groupby("gpu_uuid")
    out = pd.DataFrame(
        {
            "gpu_index": g["gpu_index"].first(),
            "points": g.size(),
            "median": g["ratio"].median(),
            "p25": g["ratio"].quantile(0.25),
            "p75": g["ratio"].quantile(0.75),
            "min": g["ratio"].min(),
            "max": g["ratio"].max(),
        }
    )
    return out.reset_index().sort_values("gpu_index", ignore_index=True)[list(SPREAD_COLUMNS)]


def key_match(multi: pd.DataFrame, single: pd.DataFrame, kind: str) -> dict:
    """Rows of each table, those only one holds (by key columns; an ncu table's kernels by
    config, launch order and name) and those whose status differs."""
    keys = list(KEYS[kind])
    if kind == "ncu":  # a kernel table: each config's kernels by name, in launch order
        multi, single = (d.assign(launch=d.groupby("config").cumcount()) for d in (multi, single))
        keys = ["config", "launch", "kernel_name"]
    a = multi[keys + (["status"] if "status" in multi else [])].drop_duplicates(keys)
    b = single[keys + (["status"] if "status" in single else [])].drop_duplicates(keys)
    j = a.merge(b, on=keys, how="outer", indicator=True, suffixes=("_multi", "_single"))
    both = j[j["_merge"] == "both"]
    differs = (
        int((both["status_multi"] != both["status_single"]).sum()) if "status_multi" in both else 0
    )
    return {
        "rows_multi": len(a),
        "rows_single": len(b),
        "only_multi": int((j["_merge"] == "left_only").sum()),
        "only_single": int((j["_merge"] == "right_only").sum()),
        "status_differs": differs,
    }


def tables_match(multi: DataRoot, single: DataRoot, shared=None) -> pd.DataFrame:
    """:func:`key_match` per table both roots hold (``dataset`` first, ``mismatches`` last:
    rows only one holds plus rows whose status differs); ``shared`` as in :func:`all_ratios`."""
    rows = [
        {"dataset": name, **key_match(a, b, kind)}
        for name, kind, a, b in (shared_tables(multi, single) if shared is None else shared)
    ]
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["mismatches"] = out.only_multi + out.only_single + out.status_differs
    return out


def workers(root: DataRoot) -> int:
    """The most workers a run of ``root``'s task log had (0 without a task log)."""
    if not root.has(COLLECT_TASKS):
        return 0
    tasks = root.load(COLLECT_TASKS)
    return int(tasks.workers.max()) if len(tasks) else 0


def pair_facts(multi: DataRoot, single: DataRoot) -> pd.DataFrame:
    """The facts of a multi-GPU root against a one-GPU root (keys prefixed :data:`PREFIX`,
    unscoped; the note says how many GPUs): ``speedup`` and ``scaling_efficiency`` (from both
    task logs), ``gpu_median_spread_pct`` (the highest per-GPU median ratio over the lowest,
    minus 1, in percent; two or more GPUs), ``worst_gpu_off_pct`` (the per-GPU median furthest
    from 1, in percent off) and ``table_mismatches`` (summed over the tables both hold). A fact
    whose tables a root lacks is left out, and all of them where ``multi`` was not collected on
    two GPUs or more (its task log says how many)."""
    rows = []
    if workers(multi) < 2:
        return facts_table(rows)
    if single.has(COLLECT_TASKS):
        sc = scaling(multi.load(COLLECT_TASKS), single.load(COLLECT_TASKS))
        if len(sc):
            r = sc.iloc[0]
            ds, note = (COLLECT_TASKS,), f"{int(r.gpus)} GPUs against one"
            rows += [
                fact(PREFIX + "speedup", r.speedup, "x", datasets=ds, note=note),
                fact(PREFIX + "scaling_efficiency", r.efficiency, "", datasets=ds, note=note),
            ]
    shared = shared_tables(multi, single)
    if shared:
        ds = tuple(name for name, *_ in shared)
        spread = gpu_spread(all_ratios(multi, single, shared))
        note = f"{len(spread)} GPUs, {int(spread.points.sum())} points" if len(spread) else ""
        if len(spread) >= 2:
            pct = 100 * (spread["median"].max() / spread["median"].min() - 1)
            rows.append(fact(PREFIX + "gpu_median_spread_pct", pct, "%", datasets=ds, note=note))
        if len(spread):
            off = 100 * float((spread["median"] - 1).abs().max())
            rows.append(fact(PREFIX + "worst_gpu_off_pct", off, "%", datasets=ds, note=note))
        match = tables_match(multi, single, shared)
        rows.append(
            fact(PREFIX + "table_mismatches", float(match.mismatches.sum()), "", datasets=ds)
        )
    return facts_table(rows)


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    multi_gpu.gpu_median_spread_pct multi_gpu.scaling_efficiency multi_gpu.table_mismatches
    """.split()
)


def facts(a: DataRoot, b: DataRoot) -> pd.DataFrame:
    """:func:`pair_facts` of two roots in either order: the one collected on two GPUs or more
    (``a`` where both were) against the other; none where neither was."""
    multi, single = (b, a) if workers(a) < 2 <= workers(b) else (a, b)
    return pair_facts(multi, single)

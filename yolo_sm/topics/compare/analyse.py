"""Two dataset roots side by side (notebook 12): provenance, sweep points, img/s and share of
each machine's ceilings, per-layer occupancy. Columns end in ``_a`` / ``_b``; ``present`` says
which root holds a row (both, only a, only b)."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.hostbound import TOLERANCE, host_bound, launch_bound
from yolo_sm.analyse.weighting import OCCUPANCY_COLUMNS
from yolo_sm.contract.datasets import MACHINE_FIELDS, DataRoot
from yolo_sm.contract.hardware import ceiling
from yolo_sm.contract.schema import KEY_COLUMNS
from yolo_sm.topics.heatmaps.analyse import layer_table

# fmt: off

BOTH, ONLY_A, ONLY_B = "both", "only a", "only b"
#: two measures of a point agree when they are within this many percent of each other
AGREE_PCT = 100 * TOLERANCE
#: the columns that name a point across machines (the device string differs between them)
POINT_KEYS = tuple(c for c in KEY_COLUMNS if c != "device")
#: the per-point values kept from each root
POINT_VALUES = (
    "img_per_s", "median_ms", "tflops", "gpu_busy_ms", "flops_per_img", "host_bound", "dataset",
)  # fmt: skip
#: provenance read from the sweep rows (MHz, bytes)
CLOCK_COLUMNS = ("sm_clock_max_mhz", "sm_clock_mhz", "mem_clock_mhz", "gpu_memory_bytes")


def _present(indicator: pd.Series) -> pd.Series:
    return indicator.map({"both": BOTH, "left_only": ONLY_A, "right_only": ONLY_B}).astype(str)


def _values(series: pd.Series) -> str:
    """Distinct values joined by ", "; more than three as their range ("1605 - 1980")."""
    nums = sorted(set(series.dropna().astype(float)))
    text = [str(int(v)) if v.is_integer() else f"{v:g}" for v in nums]
    return f"{text[0]} - {text[-1]}" if len(text) > 3 else ", ".join(text)


def provenance(root: DataRoot) -> dict:
    """:meth:`DataRoot.machine` plus the clocks and GPU memory its sweeps recorded."""
    out = dict(root.machine())
    sweeps = [root.load(n) for n in root.find_all("sweep")]
    for key in CLOCK_COLUMNS:
        vals = [s[f"prov_{key}"] for s in sweeps if f"prov_{key}" in s]
        if vals:
            text = _values(pd.to_numeric(pd.concat(vals), errors="coerce"))
            if text:
                out[key] = text
    return out


#: the rows of :func:`provenance_table`, in order
PROVENANCE_ROWS = (
    *MACHINE_FIELDS[:1], "sm_count", "compute_capability", *CLOCK_COLUMNS,
    *(f for f in MACHINE_FIELDS if f not in ("gpu_name", "sm_count", "compute_capability")),
    "date_utc_first", "date_utc_last",
)  # fmt: skip


def provenance_table(a: DataRoot, b: DataRoot) -> pd.DataFrame:
    """One row per provenance field either root records, one column per root, and ``same``."""
    pa, pb = provenance(a), provenance(b)
    rows = []
    for f in PROVENANCE_ROWS:
        va, vb = pa.get(f, ""), pb.get(f, "")
        if va or vb:
            rows.append({"field": f, f"a: {a.name}": va, f"b: {b.name}": vb, "same": va == vb})
    return pd.DataFrame(rows).set_index("field")


#: point values computed rather than read
NOT_READ = ("dataset", "host_bound")


def points(root: DataRoot, prefer: tuple[str, ...] = ()) -> pd.DataFrame:
    """Every ``ok`` sweep point of ``root`` (keys and :data:`POINT_VALUES`), once: from the
    first sweep of ``prefer`` holding it, else the first in manifest order."""
    names = root.find_all("sweep")
    order = [n for n in prefer if n in names] + [n for n in names if n not in prefer]
    frames = []
    for n in order:
        s = root.load(n)
        s = s[s["status"] == "ok"]
        keep = [c for c in (*POINT_KEYS, *POINT_VALUES) if c in s and c not in NOT_READ]
        frames.append(s[keep].assign(dataset=n, host_bound=host_bound(s).to_numpy()))
    cols = [*POINT_KEYS, *POINT_VALUES]
    if not frames:
        return pd.DataFrame(columns=cols)
    df = pd.concat(frames, ignore_index=True).reindex(columns=cols)
    for k in POINT_KEYS:
        df[k] = key_text(df[k])
    return df.drop_duplicates(list(POINT_KEYS), keep="first").reset_index(drop=True)


def key_text(values: pd.Series) -> pd.Series:
    """A key column as text: numbers as ``%g``, missing values as ""."""
    num = pd.to_numeric(values, errors="coerce")
    text = values.astype(object).where(values.notna(), "").astype(str)
    text = text.where(~text.isin(["None", "nan", "NaN"]), "")
    return text.where(num.isna(), num.map(lambda v: f"{v:g}"))


def matmul_ceilings(root: DataRoot) -> dict[str, float]:
    """precision -> the root's dense matmul ceiling (TFLOP/s), where it measured one."""
    precisions = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
    hits = {p: ceiling(root, f"matmul_{p}") for p in precisions}
    return {p: hit[0] for p, hit in hits.items() if hit is not None}


def join_points(pa: pd.DataFrame, pb: pd.DataFrame, ceil_a=None, ceil_b=None) -> pd.DataFrame:
    """Two :func:`points` tables outer-joined on :data:`POINT_KEYS`: values per side, ``ratio``
    (b / a img/s), ``pct_of_ceiling_*`` (% of that machine's matmul ceiling) and
    ``launch_bound`` (host-bound on either machine: measured, else eager at small batch)."""
    keys = list(POINT_KEYS)
    vals = [c for c in POINT_VALUES if c != "flops_per_img"]
    pa, pb = (p.reindex(columns=[*keys, *POINT_VALUES]) for p in (pa, pb))
    m = pa[[*keys, *vals, "flops_per_img"]].merge(
        pb[[*keys, *vals]], on=keys, how="outer", suffixes=("_a", "_b"), indicator=True
    )
    m["present"] = _present(m.pop("_merge"))
    m["ratio"] = m["img_per_s_b"] / m["img_per_s_a"]
    for side, ceil in (("a", ceil_a or {}), ("b", ceil_b or {})):
        peak = m["precision"].map(ceil).astype(float)
        m[f"pct_of_ceiling_{side}"] = pd.to_numeric(m[f"tflops_{side}"]) / peak * 100
    batch = pd.to_numeric(m["batch"], errors="coerce")
    guess = pd.Series(launch_bound(m["backend"], batch), index=m.index).astype(bool)
    measured = [m[f"host_bound_{x}"].astype("boolean").fillna(guess) for x in "ab"]
    m["launch_bound"] = (measured[0] | measured[1]).astype(bool)
    m["batch"] = batch.astype("Int64")
    order = {BOTH: 0, ONLY_A: 1, ONLY_B: 2}
    m = m.sort_values(
        ["present", "family", "width", "precision", "layout", "backend", "batch"],
        key=lambda s: s.map(order) if s.name == "present" else s,
    )
    return m.reset_index(drop=True)


def compare_points(a: DataRoot, b: DataRoot) -> pd.DataFrame:
    """:func:`join_points` of both roots' sweeps; a sweep name both hold wins."""
    shared = tuple(n for n in a.find_all("sweep") if n in set(b.find_all("sweep")))
    return join_points(points(a, shared), points(b, shared), matmul_ceilings(a), matmul_ceilings(b))


def presence(m: pd.DataFrame) -> pd.DataFrame:
    """Points per ``present`` value and per dataset (one row each)."""
    ds = m["dataset_a"].fillna(m["dataset_b"])
    out = m.assign(dataset=ds).groupby(["present", "dataset"]).size().rename("points")
    return out.reset_index()


def spread(m: pd.DataFrame) -> pd.DataFrame:
    """Per ``launch_bound``, the b / a img/s ratio of shared points: quantiles, largest
    deviation (%) and points within the tolerance."""
    g = m[m.present == BOTH].assign(ratio=lambda d: d.ratio.astype(float))
    g = g.assign(dev=(g.ratio - 1).abs() * 100).groupby("launch_bound")
    out = g.ratio.agg(points="size", ratio_median="median", ratio_min="min", ratio_max="max")
    out["ratio_p10"], out["ratio_p90"] = g.ratio.quantile(0.1), g.ratio.quantile(0.9)
    out["max_dev_pct"] = g.dev.max()
    out["within_10pct"] = g.dev.agg(lambda d: int((d <= AGREE_PCT).sum()))
    return out.reset_index()


def layers(root: DataRoot) -> pd.DataFrame:
    """Per (config, layer) time-weighted occupancy from every layered Nsight Compute table of
    ``root`` (the first table holding a config wins)."""
    cols = ["config", "layer", "layer_idx", "module_type", "time_us", "achieved_occupancy_tw_pct"]
    cols += ["theoretical_occupancy_tw_pct", "main_limiter", "dataset"]
    frames, seen = [], set()
    for n in root.find_all("ncu"):
        k = root.load(n)
        if not {"layer", "config", *OCCUPANCY_COLUMNS} <= set(k) or k.empty:
            continue
        k = k[~k["config"].isin(seen)]
        if k.empty:
            continue
        seen |= set(k["config"])
        t = layer_table(k)
        frames.append(t.assign(dataset=n)[cols[:-1] + ["dataset"]])
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)


def join_layers(la: pd.DataFrame, lb: pd.DataFrame) -> pd.DataFrame:
    """Two :func:`layers` tables outer-joined, with ``achieved_minus_pct_points`` (b - a)."""
    vals = ["time_us", "achieved_occupancy_tw_pct", "theoretical_occupancy_tw_pct"]
    vals += ["main_limiter", "dataset"]
    on = ["config", "layer"]
    m = la.merge(lb[[*on, *vals]], on=on, how="outer", suffixes=("_a", "_b"), indicator=True)
    m["present"] = _present(m.pop("_merge"))
    m["achieved_minus_pct_points"] = m.achieved_occupancy_tw_pct_b - m.achieved_occupancy_tw_pct_a
    return m.sort_values(["config", "layer_idx"]).reset_index(drop=True)


def compare_layers(a: DataRoot, b: DataRoot) -> pd.DataFrame:
    return join_layers(layers(a), layers(b))


PREFIX = "compare."
#: the facts a rule reads
FACT_KEYS = frozenset(
    PREFIX + k
    for k in ("b_faster_share_pct", "gpu_bound_within_pct", "host_bound_gpu_busy_within_pct")
)


def facts(a: DataRoot, b: DataRoot, m: pd.DataFrame | None = None) -> pd.DataFrame:
    """% of shared GPU-bound points within :data:`AGREE_PCT` and where b is faster; % of
    host-bound ones whose GPU busy time agrees within it. NaN over no point."""
    m = compare_points(a, b) if m is None else m
    both = m[m.present == BOTH]
    ds = tuple(sorted({f"{a.name}/{d}" for d in both.dataset_a.dropna()}))
    ds += tuple(sorted({f"{b.name}/{d}" for d in both.dataset_b.dropna()}))
    host = both.launch_bound.astype(bool)
    gpu = both.ratio[~host].astype(float)
    busy = pd.to_numeric(both.gpu_busy_ms_b[host]) / pd.to_numeric(both.gpu_busy_ms_a[host])
    busy = busy.dropna()
    within = lambda r: 100 * ((r - 1).abs() * 100 <= AGREE_PCT).mean()  # noqa: E731
    return facts_table([
        fact(PREFIX + "gpu_bound_within_pct", within(gpu), "%", datasets=ds, points=len(gpu),
             note=f"{len(gpu)} points"),
        fact(PREFIX + "b_faster_share_pct", 100 * (gpu > 1).mean(), "%", datasets=ds,
             points=len(gpu), note=f"{len(gpu)} points"),
        fact(PREFIX + "host_bound_gpu_busy_within_pct", within(busy), "%", datasets=ds,
             points=len(busy), note=f"{len(busy)} points"),
    ])  # fmt: skip

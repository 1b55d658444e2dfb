"""Two models on one GPU: what each engine delivers alone and beside the other, and the timing
math on plain numbers (rates over the common busy window, kernel overlap)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.contract.datasets import DataRoot

MODES = ("alone_a", "alone_b", "streams", "processes")
TOGETHER = ("streams", "processes")
ENGINES = ("a", "b")
DATASET = "sharing"
GPM = "sharing_gpm"
KERNELS = "sharing_kernels"


def pair_label(a: tuple[float, int], b: tuple[float, int]) -> str:
    """``((1.0, 16), (0.25, 1))`` -> ``"1x16+0.25x1"`` (the form rules' scopes name)."""
    return "+".join(f"{w:g}x{int(n)}" for w, n in (a, b))


def window(runs) -> tuple[float, float]:
    """The window (ms) in which every engine of ``runs`` (``[(starts, ends), ...]``) ran."""
    return max(float(s[0]) for s, _ in runs), min(float(e[-1]) for _, e in runs)


def window_rows(runs, batches, common: bool = True) -> list[dict]:
    """Per engine over the batches inside the common window (``common=False``: its own):
    batches, img/s and latency (ms) p50, p99 and mean."""
    out = []
    shared = window(runs) if common else None
    for (starts, ends), batch in zip(runs, batches, strict=True):
        s, e = np.asarray(starts, float), np.asarray(ends, float)
        lo, hi = shared if shared else (float(s[0]), float(e[-1]))
        inside = (s >= lo) & (e <= hi)
        lat, n, span_s = e[inside] - s[inside], int(inside.sum()), (hi - lo) / 1e3
        stats = (np.quantile(lat, 0.5), np.quantile(lat, 0.99), lat.mean()) if n else [math.nan] * 3
        img = n * batch / span_s if span_s > 0 and n else math.nan
        keys = ("p50_ms", "p99_ms", "mean_ms")
        out.append({"batches": n, "window_s": span_s, "img_per_s": img,
                    **{k: float(v) for k, v in zip(keys, stats, strict=True)}})  # fmt: skip
    return out


def _merged(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint (starts, ends)."""
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, float)[order], np.asarray(ends, float)[order]
    new = np.r_[True, s[1:] > np.maximum.accumulate(e)[:-1]]  # starts past every earlier end
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new))


def overlap_us(starts, ends, other_starts, other_ends) -> np.ndarray:
    """Per interval of the first set, how long the other set ran during it (same unit)."""
    starts, ends = np.asarray(starts, float), np.asarray(ends, float)
    if not len(other_starts) or not len(starts):
        return np.zeros(len(starts))
    ms, me = _merged(other_starts, other_ends)
    cum = np.concatenate([[0.0], np.cumsum(me - ms)])

    def covered(x):  # length of the other set's union before time x
        i = np.searchsorted(ms, x, side="right")
        j = np.maximum(i - 1, 0)
        part = np.clip(np.minimum(x, me[j]) - ms[j], 0.0, None)
        return np.where(i > 0, cum[j] + part, 0.0)

    return covered(ends) - covered(starts)


def kernel_classes(kernels: pd.DataFrame, batches: dict, pair: str, mode: str) -> pd.DataFrame:
    """Per engine and kernel class of one capture: kernels, time (us), time per replay, share,
    and the time that ran beside the other engine's kernels."""
    cols = ["pair", "mode", "engine", "kernel_class", "kernels", "time_us", "batches",
            "time_us_per_batch", "time_share", "overlap_us", "overlap_share"]  # fmt: skip
    if kernels.empty:
        return pd.DataFrame(columns=cols)
    k = kernels.assign(end_us=kernels.start_us + kernels.duration_us)
    parts = []
    for eng, g in k.groupby("engine"):
        other = k[k.engine != eng]
        ov = overlap_us(g.start_us, g.end_us, other.start_us, other.end_us)
        parts.append(g.assign(overlap_us=ov))
    k = pd.concat(parts)
    agg = k.groupby(["engine", "kernel_class"], as_index=False).agg(
        kernels=("duration_us", "size"),
        time_us=("duration_us", "sum"),
        overlap_us=("overlap_us", "sum"),
    )
    agg["batches"] = agg.engine.map(batches).astype(int)
    agg["time_us_per_batch"] = agg.time_us / agg.batches.where(agg.batches > 0)
    agg["time_share"] = agg.time_us / agg.groupby("engine").time_us.transform("sum")
    agg["overlap_share"] = agg.overlap_us / agg.time_us.where(agg.time_us > 0)
    return agg.assign(pair=pair, mode=mode)[cols]


def rates(sharing: pd.DataFrame) -> pd.DataFrame:
    """Per (pair, mode, engine): img/s, p50 / p99 (ms), ``slowdown`` (alone img/s over this)
    and ``p99_inflation`` (this p99 over alone)."""
    s = sharing[[c for c in sharing.columns if not c.startswith("prov_")]].copy()
    alone = s[s["mode"] == "alone_" + s["engine"]]
    base = alone.set_index(["pair", "engine"])[["img_per_s", "p99_ms"]].add_prefix("alone_")
    out = s.join(base, on=["pair", "engine"])
    out["slowdown"] = out.alone_img_per_s / out.img_per_s
    out["p99_inflation"] = out.p99_ms / out.alone_p99_ms
    order = {m: i for i, m in enumerate(MODES)}
    out = out.sort_values(
        ["pair", "mode", "engine"], key=lambda c: c.map(order) if c.name == "mode" else c
    )
    keep = ["pair", "mode", "engine", "config", "batches", "img_per_s", "p50_ms", "p99_ms"]
    return out[keep + ["slowdown", "p99_inflation"]].reset_index(drop=True)


def totals(sharing: pd.DataFrame) -> pd.DataFrame:
    """Per pair and together-mode: summed img/s over the faster engine alone, and
    ``work_done`` (each engine's share of its alone img/s, summed: 2 = each as fast as alone)."""
    r = rates(sharing)
    rows = []
    for (pair, mode), g in r[r["mode"].isin(TOGETHER)].groupby(["pair", "mode"], sort=False):
        if set(g.engine) != set(ENGINES):
            continue
        best = r[(r.pair == pair) & r["mode"].isin(("alone_a", "alone_b"))]
        best = best[best["mode"] == "alone_" + best["engine"]].img_per_s.max()
        total = g.img_per_s.sum()
        work = float((1.0 / g.slowdown).sum())
        rows.append((pair, mode, total, best, total / best, work))
    cols = ["pair", "mode", "together_img_per_s", "best_alone_img_per_s", "sum_over_best_alone",
            "work_done"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def kernel_slowdown(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per pair, engine and kernel class: time per batch (us) alone and on two streams, the
    ratio and the overlapped share."""
    k = kernels[[c for c in kernels.columns if not c.startswith("prov_")]]
    alone = k[k["mode"] == "alone_" + k["engine"]]
    together = k[k["mode"] == "streams"]
    keys = ["pair", "engine", "kernel_class"]
    out = together.merge(
        alone[[*keys, "time_us_per_batch"]], on=keys, how="left", suffixes=("", "_alone")
    )
    out = out.rename(columns={"time_us_per_batch": "together_us_per_batch"})
    out["alone_us_per_batch"] = out.pop("time_us_per_batch_alone")
    out["slowdown"] = out.together_us_per_batch / out.alone_us_per_batch
    cols = [*keys, "alone_us_per_batch", "together_us_per_batch", "slowdown", "time_share",
            "overlap_share"]  # fmt: skip
    return out[cols].sort_values(["pair", "engine", "time_share"], ascending=[True, True, False])


def settings(sharing: pd.DataFrame) -> pd.DataFrame:
    """The GPU's MPS, MIG and compute-mode settings when the step ran."""
    names = ("mps_server", "mig_mode", "compute_mode", "mps_used", "mig_used")
    cols = [c for c in names if c in sharing]
    return sharing[cols].drop_duplicates().reset_index(drop=True)


def scope(pair: str, mode: str, engine: str = "") -> str:
    return f"pair={pair}, mode={mode}" + (f", engine={engine}" if engine else "")


def sharing_facts(sharing: pd.DataFrame, kernels: pd.DataFrame | None = None) -> pd.DataFrame:
    """``sharing.*`` facts of :func:`totals`, :func:`rates`, streams over processes and the
    kernels' overlap share."""
    d, rows = (DATASET,), []
    tot = totals(sharing)
    for t in tot.itertuples():
        sc = scope(t.pair, t.mode)
        rows.append(fact("sharing.sum_over_best_alone", t.sum_over_best_alone, "x", scope=sc,
                         datasets=d))  # fmt: skip
        rows.append(fact("sharing.work_done", t.work_done, "x", scope=sc, datasets=d))
    by = tot.pivot_table(index="pair", columns="mode", values="together_img_per_s")
    if set(TOGETHER) <= set(by):
        for pair, v in (by.streams / by.processes).dropna().items():
            rows.append(fact("sharing.streams_over_processes", v, "x", scope=f"pair={pair}",
                             datasets=d))  # fmt: skip
    r = rates(sharing)
    for t in r[r["mode"].isin(TOGETHER)].itertuples():
        rows.append(fact("sharing.p99_inflation", t.p99_inflation, "x",
                         scope=scope(t.pair, t.mode, t.engine), datasets=d))  # fmt: skip
    if kernels is not None and len(kernels):
        k = kernels[kernels["mode"] == "streams"]
        for (pair, eng), g in k.groupby(["pair", "engine"]):
            share = g.overlap_us.sum() / g.time_us.sum() if g.time_us.sum() > 0 else math.nan
            rows.append(fact("sharing.overlap_share", share, "", scope=scope(pair, "streams", eng),
                             datasets=(KERNELS,)))  # fmt: skip
    return facts_table(r for r in rows if not math.isnan(r["value"]))


def facts(root: DataRoot) -> pd.DataFrame:
    """The sharing facts of ``root`` (empty when it holds no ``sharing`` table)."""
    if not root.has(DATASET):
        return facts_table([])
    kernels = root.load(KERNELS) if root.has(KERNELS) else None
    return sharing_facts(root.load(DATASET), kernels)


#: the facts :func:`facts` computes (a rule naming another fails to load)
FACT_KEYS = frozenset(
    f"sharing.{k}" for k in ("overlap_share", "p99_inflation", "streams_over_processes",
                             "sum_over_best_alone", "work_done")
)  # fmt: skip


def sweep_alone(
    sweep: pd.DataFrame, pairs=(((1.0, 16), (0.25, 1)), ((0.5, 16), (0.5, 16)))
) -> pd.DataFrame:
    """The pairs' engines alone as the sweep measured them (CUDA graph, fp16 NHWC, 640 px)."""
    s = sweep[(sweep.backend == "cudagraph") & (sweep.status == "ok")]
    s = s[(s.precision == "fp16") & (s.layout == "nhwc") & (s.imgsz == 640)]
    if "scale" in s:
        s = s[s.scale.fillna("") == ""]
    s = s.drop_duplicates(["width", "batch"]).set_index(["width", "batch"])
    rows = [
        (pair_label(a, b), eng, w, n, *s.loc[(w, n), ["img_per_s", "median_ms"]])
        for a, b in pairs
        for eng, (w, n) in zip(ENGINES, (a, b), strict=True)
        if (w, n) in s.index
    ]
    cols = ["pair", "engine", "width", "batch", "img_per_s", "median_ms"]
    return pd.DataFrame(rows, columns=cols)

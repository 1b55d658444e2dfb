"""Batch size (notebook 03): img/s and latency per batch, the knee, the CUDA-graph speed-up, SM
coverage (Nsight Compute) and memory lines, one quantity measured twice, and the facts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.gpm import SUMMARY_METRICS as GPM_METRICS  # noqa: F401 - used by reports
from yolo_sm.analyse.weighting import time_weighted
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config as _parse
from yolo_sm.contract.labels import with_config

# fmt: off

# the datasets notebook 03 reads (short names in a root)
SWEEP = "sweep_fp16_nhwc"  # width x batch grid, eager and CUDA graph
SWEEP_1280 = "sweep_1280"  # the same at 1280 px
POOL_SWEEP = "sweep_bf16_nhwc"  # holds the fp16 points again, with each graph's private pool
NCU = "ncu_batch_w1"  # Nsight Compute per kernel, one width, a few batches
GPM = "gpm_batch_w1"  # GPM timeline, one width, batch 1-128
#: the reference config of the one-config facts: 640 px (else the most measured size) and
#: the measured width nearest 1.0
REF_IMGSZ, REF_WIDTH = 640, 1.0
#: share of GPU memory the article's batch rule spends (safe batch = floor(0.7 x memory / image))
MEMORY_BUDGET = 0.7
#: share of its best img/s at which a config counts as saturated (the knee)
SATURATION = 0.9
_CFG = ["imgsz", "width", "backend"]


def parse_config(label: str) -> dict:
    """:func:`yolo_sm.contract.labels.parse_config`, lenient: NaN / None for another form."""
    return _parse(label, strict=False)


def batch_table(sweep):
    """The ok rows of a sweep, sorted, with ``frac_of_best`` (img/s over its config's best)."""
    cols = ["imgsz", "width", "backend", "batch", "img_per_s", "median_ms", "iqr_ms", "tflops"]
    cols += ["peak_mem_bytes", "graph_pool_bytes", "build_peak_mem_bytes", "gpu_busy_ms", "noisy"]
    ok = sweep[sweep["status"] == "ok"]
    out = ok[[c for c in cols if c in ok]].sort_values(_CFG + ["batch"], ignore_index=True)
    return out.assign(frac_of_best=out.img_per_s / out.groupby(_CFG).img_per_s.transform("max"))


def saturation(table, frac: float = SATURATION):
    """Per config: best img/s and batch, the knee (first batch at ``frac`` of the best), and the
    gain from batch 1."""
    t = table.sort_values("batch")
    g = t.groupby(_CFG)
    best = t.loc[g.img_per_s.idxmax()].set_index(_CFG)
    knee = t[t.img_per_s >= frac * g.img_per_s.transform("max")].groupby(_CFG).head(1)
    knee = knee.set_index(_CFG)
    out = best[["img_per_s", "batch"]].add_prefix("best_").assign(
        knee_batch=knee.batch, knee_img_per_s=knee.img_per_s, knee_ms=knee.median_ms,
        b1_img_per_s=t[t.batch == 1].groupby(_CFG).img_per_s.first(),
    )  # fmt: skip
    out = out.astype({"best_batch": int, "knee_batch": int}).reset_index()
    return out.assign(gain_b1_to_best=out.best_img_per_s / out.b1_img_per_s)


def graph_speedup(table):
    """Per (imgsz, width, batch): eager and cudagraph latency (ms) and their ratio."""
    p = table.pivot_table(index=["imgsz", "width", "batch"], columns="backend", values="median_ms")
    p = p.reindex(columns=sorted({*p.columns, "eager", "cudagraph"})).reset_index()
    p.columns.name = None
    return p.assign(speedup=p.eager / p.cudagraph)


def ncu_coverage(ncu):
    """Per config: time-weighted occupancy, median waves per SM, shares under one wave."""
    d = with_config(ncu)
    under = d.waves_per_sm < 1
    d = d.assign(_under=under.astype(float), _under_t=d.duration_us.where(under, 0.0))
    agg = d.groupby("config").agg(
        median_waves=("waves_per_sm", "median"), kernels_under_1_wave=("_under", "mean"),
        _ut=("_under_t", "sum"),
    )
    out = time_weighted(d, ["config", "batch"]).merge(agg.reset_index(), on="config")
    out["time_under_1_wave"] = out.pop("_ut") / out.time_us
    out["achieved_over_theoretical"] = (out.achieved_occupancy_tw_pct
                                        / out.theoretical_occupancy_tw_pct)
    return out.sort_values("batch", ignore_index=True)


def memory_fit(table, value: str = "peak_mem_bytes"):
    """Per config: the line ``value = intercept + slope x batch`` (bytes), its R² and the peak
    at the largest batch; a graph's pool counted where recorded (``counts_activations``)."""
    t = table.copy()
    pooled = t.graph_pool_bytes.notna() if "graph_pool_bytes" in t else t.batch.isna()
    t.loc[pooled, value] = t[value] + t.get("graph_pool_bytes", 0)
    rows = []
    for key, g in t.dropna(subset=[value]).groupby(_CFG):
        counts = key[2] != "cudagraph" or pooled[g.index].sum() >= 2
        if key[2] == "cudagraph":  # a resumed sweep can mix rows with and without the pool
            g = g[pooled[g.index] == counts]
        if len(g) < 2:
            continue
        b, m = g.batch.to_numpy(float), g[value].to_numpy(float)
        slope, intercept = np.polyfit(b, m, 1)
        ss = ((m - m.mean()) ** 2).sum()
        r2 = 1 - ((m - intercept - slope * b) ** 2).sum() / ss if ss > 0 else math.nan
        rows.append(
            dict(
                zip(_CFG, key, strict=True), per_image_bytes=slope, intercept_bytes=intercept,
                r2=r2, batches=len(g), max_batch=int(b.max()),
                peak_at_max_batch_bytes=float(m[b.argmax()]), counts_activations=counts,
            )
        )
    return pd.DataFrame(rows)


def graph_memory(fit):
    """Eager against CUDA graph memory (MB) per (imgsz, width), and the graph's peak over
    eager's at the largest batch."""
    e = fit[fit.backend == "eager"].set_index(["imgsz", "width"])
    g = fit[(fit.backend == "cudagraph") & fit.counts_activations].set_index(["imgsz", "width"])
    both = e.index.intersection(g.index)
    e, g = e.loc[both], g.loc[both]
    out = pd.DataFrame(
        {
            "eager_per_image_MB": e.per_image_bytes / 1e6,
            "graph_per_image_MB": g.per_image_bytes / 1e6,
            "per_image_ratio": g.per_image_bytes / e.per_image_bytes,
            "eager_intercept_MB": e.intercept_bytes / 1e6,
            "graph_intercept_MB": g.intercept_bytes / 1e6, "max_batch": e.max_batch,
            "footprint_ratio_at_max": g.peak_at_max_batch_bytes / e.peak_at_max_batch_bytes,
        }
    )
    return out.reset_index()


def memory_budget(fit, gpu_memory_bytes: float, frac: float = MEMORY_BUDGET):
    """A :func:`memory_fit` in MB with ``fitted_safe_batch`` (within ``frac`` of GPU memory)."""
    out = fit.assign(per_image_MB=fit.per_image_bytes / 1e6, intercept_MB=fit.intercept_bytes / 1e6)
    if gpu_memory_bytes > 0:
        safe = (frac * gpu_memory_bytes - fit.intercept_bytes) / fit.per_image_bytes
        out = out.assign(
            fitted_safe_batch=safe.map(math.floor),
            peak_at_max_batch_pct=100 * fit.peak_at_max_batch_bytes / gpu_memory_bytes,
        )
    return out


def build_vs_timed(table):
    """Per point: build and timed peak memory, and their ratio."""
    cols = ["imgsz", "width", "backend", "batch", "peak_mem_bytes", "build_peak_mem_bytes"]
    d = table.dropna(subset=cols[-2:])[cols]
    return d.assign(build_over_timed=d.build_peak_mem_bytes / d.peak_mem_bytes)


def nearest(values, target: float) -> float:
    """The value of ``values`` nearest to ``target`` (the smaller of a tie)."""
    return min(sorted(set(values)), key=lambda v: (abs(v - target), v))


def ref_imgsz(table) -> int:
    """:data:`REF_IMGSZ` where ``table`` holds it, else its most measured image size."""
    sizes = table["imgsz"].value_counts()
    if REF_IMGSZ in sizes.index or sizes.empty:
        return REF_IMGSZ
    return int(min(sizes.index[sizes == sizes.max()]))


def gpu_memory(sweep) -> float:
    """The GPU's memory in bytes from a sweep's provenance (NaN without it)."""
    m = sweep["prov_gpu_memory_bytes"].dropna() if "prov_gpu_memory_bytes" in sweep else ()
    return float(m.iloc[0]) if len(m) else math.nan


def sweep_facts(table, gpu_memory_bytes: float = math.nan, datasets=()) -> list[dict]:
    """Batch gain, share of best at batch 8, graph speed-ups and :func:`memory_facts` of a
    :func:`batch_table` at its reference size."""
    ds, size = tuple(datasets), ref_imgsz(table)
    t = table[table.imgsz == size]
    if t.empty:
        return []
    eager = t[t.backend == "eager"]
    out = []
    if len(eager):
        w = nearest(eager.width, REF_WIDTH)
        g = eager[eager.width == w]
        if (g.batch == 1).any():
            gain = g.img_per_s.max() / g.img_per_s[g.batch == 1].iloc[0]
            out.append(
                fact(
                    "batch_gain_b1_to_best", gain, "x", scope="eager", datasets=ds,
                    note=f"{size} px, width {w:g}",
                )
            )
    if eager.width.nunique() > 1:  # narrowest and widest: two widths, not one read twice
        for scope, w in (("narrowest", eager.width.min()), ("widest", eager.width.max())):
            g = eager[(eager.width == w) & (eager.batch == 8)]
            if len(g):
                out.append(
                    fact(
                        "batch_frac_of_best_at_b8", 100 * g.frac_of_best.iloc[0], "%", scope=scope,
                        datasets=ds, note=f"eager, {size} px, width {w:g}",
                    )
                )
    sp = graph_speedup(t).dropna(subset=["speedup"])
    for key, sel, agg in (
        ("batch_graph_speedup_b1_min", sp.batch == 1, "min"),
        ("batch_graph_speedup_from_b32_max", sp.batch >= 32, "max"),
    ):
        if sel.any():
            out.append(
                fact(
                    key, sp.speedup[sel].agg(agg), "x", datasets=ds,
                    note=f"eager / graph latency, {agg} over widths, {size} px",
                )
            )
    return out + memory_facts(table, gpu_memory_bytes, ds)


def memory_facts(table, gpu_memory_bytes: float, datasets=()) -> list[dict]:
    """Eager memory facts: GB per image, worst R², peak at the knee (% of GPU memory) and the
    per-image memory at twice the side over the reference size's."""
    ds = tuple(datasets)
    if "peak_mem_bytes" not in table or table.peak_mem_bytes.notna().sum() < 2:
        return []
    fit, size = memory_fit(table), ref_imgsz(table)
    e = fit[(fit.imgsz == size) & (fit.backend == "eager")] if len(fit) else fit
    if e.empty:
        return []
    w = nearest(e.width, REF_WIDTH)
    r = e[e.width == w].iloc[0]
    out = [
        fact(
            "batch_memory_per_image_gb", r.per_image_bytes / 1e9, "GB", datasets=ds,
            note=f"eager, {size} px, width {w:g}",
        ),
        fact(
            "batch_memory_fit_r2_min", e.r2.min(), "", datasets=ds,
            note=f"eager, {size} px, lowest R² over widths",
        ),
    ]
    ok = table[(table.imgsz == size) & (table.backend == "eager")]
    if gpu_memory_bytes > 0 and len(ok):
        knee = saturation(ok).set_index("width").knee_batch
        at = ok[ok.batch == ok.width.map(knee)]
        out.append(
            fact(
                "batch_peak_mem_at_knee_pct", 100 * at.peak_mem_bytes.max() / gpu_memory_bytes, "%",
                datasets=ds, note=f"eager, {size} px, highest over widths",
            )
        )
    big = fit[(fit.imgsz == 2 * size) & (fit.backend == "eager") & (fit.width == w)]
    if len(big):
        out.append(
            fact(
                "batch_memory_1280_over_640", big.per_image_bytes.iloc[0] / r.per_image_bytes, "x",
                datasets=ds, note=f"eager, width {w:g}, per-image memory",
            )
        )
    return out


def coverage_facts(coverage, datasets=()) -> list[dict]:
    """Achieved occupancy's rise and theoretical occupancy's range over the batches (points)."""
    c = coverage.sort_values("batch")
    if len(c) < 2:
        return []
    ds, span = tuple(datasets), f"batch {int(c.batch.iloc[0])} to {int(c.batch.iloc[-1])}"
    th = c.theoretical_occupancy_tw_pct
    return [
        fact(
            "batch_ncu_achieved_occupancy_rise",
            c.achieved_occupancy_tw_pct.iloc[-1] - c.achieved_occupancy_tw_pct.iloc[0], "pp",
            datasets=ds, note=span,
        ),
        fact(
            "batch_ncu_theoretical_occupancy_range", th.max() - th.min(), "pp", datasets=ds,
            note=f"{len(c)} batches, {span}",
        ),
    ]



GRAPH, EAGER = "cudagraph/fp16/nhwc", "eager/fp16/nhwc"


def _version(df) -> str:
    v = df["prov_yolo_sm"].dropna() if "prov_yolo_sm" in df else []
    return str(v.iloc[0]) if len(v) else ""


def graph_speedup_sweep_vs_bench(sweep, bench, batch: int = 1) -> pd.DataFrame:
    """Per width at ``batch``: eager and graph latency (ms) and speed-up in the sweep and in the
    bench, each backend's bench over sweep latency, and which backend ``moved`` more."""
    s = sweep[(sweep.status == "ok") & (sweep.batch == batch)]
    if "precision" in s:
        s = s[(s.precision == "fp16") & (s.layout == "nhwc")]
    sw = s.pivot_table(index="width", columns="backend", values="median_ms")
    b = bench[(bench.status == "ok") & (bench.batch == batch)]
    bw = b.pivot_table(index="width", columns="variant", values="median_ms")
    if not {"eager", "cudagraph"} <= set(sw) or not {EAGER, GRAPH} <= set(bw):
        return pd.DataFrame()
    widths = sw.index.intersection(bw.index)
    out = pd.DataFrame(
        {
            "sweep_eager_ms": sw.loc[widths, "eager"],
            "sweep_graph_ms": sw.loc[widths, "cudagraph"],
            "bench_eager_ms": bw.loc[widths, EAGER],
            "bench_graph_ms": bw.loc[widths, GRAPH],
        }
    )
    out["sweep_speedup"] = out.sweep_eager_ms / out.sweep_graph_ms
    out["bench_speedup"] = out.bench_eager_ms / out.bench_graph_ms
    out["eager_ratio"] = out.bench_eager_ms / out.sweep_eager_ms
    out["graph_ratio"] = out.bench_graph_ms / out.sweep_graph_ms
    dev = lambda r: (r - 1).abs()  # noqa: E731
    out["moved"] = ["eager" if e >= g else "graph" for e, g in
                    zip(dev(out.eager_ratio), dev(out.graph_ratio), strict=True)]  # fmt: skip
    return out.reset_index()


def eager_memory_between_runs(first, again, imgsz: int = 640) -> pd.DataFrame:
    """Per width: eager memory per image (MB) in ``first`` and in its repeat ``again``, the
    batches fitted, the ratio, and each run's date and package version."""
    again = again[again.precision.isin(first.precision.unique())]
    fits = []
    for df in (first, again):
        f = memory_fit(batch_table(df))
        fits.append(f[(f.backend == "eager") & (f.imgsz == imgsz)].set_index("width"))
    a, b = fits
    widths = a.index.intersection(b.index)
    out = pd.DataFrame(
        {
            "first_per_image_MB": a.loc[widths, "per_image_bytes"] / 1e6,
            "again_per_image_MB": b.loc[widths, "per_image_bytes"] / 1e6,
            "first_batches": a.loc[widths, "batches"],
            "again_batches": b.loc[widths, "batches"],
        }
    )
    out["ratio"] = out.again_per_image_MB / out.first_per_image_MB
    out["first_measured_utc"] = str(first.prov_date_utc.min())[:16]
    out["again_measured_utc"] = str(again.prov_date_utc.min())[:16]
    out["first_version"], out["again_version"] = _version(first), _version(again)
    return out.reset_index()


def eager_memory_by_batch(first, again, width: float, imgsz: int = 640) -> pd.DataFrame:
    """Eager peak memory (MB) per batch at one ``width`` in both runs, and the difference."""
    rows = []
    for name, df in (("first", first), ("again", again)):
        t = batch_table(df[df.precision.isin(first.precision.unique())])
        t = t[(t.backend == "eager") & (t.width == width) & (t.imgsz == imgsz)]
        rows.append(t.set_index("batch").peak_mem_bytes.rename(f"{name}_peak_MB") / 1e6)
    out = pd.concat(rows, axis=1).dropna()
    out["difference_MB"] = out.again_peak_MB - out.first_peak_MB
    return out.reset_index()


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    batch_frac_of_best_at_b8 batch_gain_b1_to_best batch_graph_footprint_ratio_min
    batch_graph_speedup_b1_min batch_graph_speedup_from_b32_max batch_memory_1280_over_640
    batch_memory_fit_r2_min batch_ncu_achieved_occupancy_rise batch_ncu_theoretical_occupancy_range
    batch_peak_mem_at_knee_pct
    """.split()
)


def facts(
    root: DataRoot, *, sweep=SWEEP, sweep_1280=SWEEP_1280, pool_sweep=POOL_SWEEP, ncu=NCU
) -> pd.DataFrame:
    """The facts of notebook 03 from the datasets ``root`` holds."""
    rows, has = [], (lambda n: bool(n) and root.has(n))
    if has(sweep):
        s = root.load(sweep)
        names = [sweep] + ([sweep_1280] if has(sweep_1280) else [])
        both = pd.concat([root.load(n) for n in names], ignore_index=True)
        rows += sweep_facts(batch_table(both), gpu_memory(s), names)
        if has(pool_sweep):
            p = root.load(pool_sweep)
            p = p[p.precision.isin(s.precision.unique())]
            gm = graph_memory(memory_fit(batch_table(p))) if "peak_mem_bytes" in p else ()
            if len(gm):
                rows.append(
                    fact(
                        "batch_graph_footprint_ratio_min", gm.footprint_ratio_at_max.min(), "x",
                        datasets=(pool_sweep,), note="lowest over widths",
                    )
                )
    if has(ncu):
        rows += coverage_facts(ncu_coverage(root.load(ncu)), [ncu])
    return facts_table(rows)

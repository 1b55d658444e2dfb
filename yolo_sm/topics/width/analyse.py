"""Width scaling (notebook 01): tables and facts per width, against the root's measured fp16 matmul
ceiling."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.bench_table import ok_rows
from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.hostbound import host_bound
from yolo_sm.analyse.kernels import with_kernel_class
from yolo_sm.analyse.occupancy import LIMIT_COLUMNS, binding
from yolo_sm.analyse.weighting import layer_view, time_weighted
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import with_config
from yolo_sm.topics.deploy.analyse import BASELINE

LIMITS = tuple(LIMIT_COLUMNS.values())

# the datasets notebook 01 reads (short names inside a root)
SWEEP = "sweep_fp16_nhwc"
NCU_WIDTH = "ncu_width_b8"
NCU_WIDE = "ncu_wide_stack"
PRESETS = "sweep_presets"
BENCH = "bench_fast_engines"
CEILINGS = "ceilings"
MODEL_LAYERS = "model_layers"

#: the backend whose throughput sits beside the Nsight Compute capture (no launch cost)
GRAPH_BACKEND = "cudagraph"
#: the batch the width facts compare at (that of the Nsight Compute capture)
BATCH = 8


def peak_tflops(root: DataRoot, ceiling: str = "matmul_fp16") -> float:
    """The root's measured matmul ceiling ``ceiling`` (TFLOP/s), NaN when the root holds none."""
    if not root.has(CEILINGS):
        return math.nan
    c = root.load(CEILINGS)
    hit = c[c.ceiling == ceiling]
    return float(hit.value.iloc[0]) if len(hit) else math.nan


# ---- FLOPs and throughput per width -----------------------------------------------------------


def flops_by_width(sweep):
    """GFLOPs per image per width, their ratio to width 1.0 and the w^2 law from width 1.0."""
    t = sweep.groupby("width", as_index=False).flops_per_img.first()
    t["gflops_per_img"] = t.flops_per_img / 1e9
    base = t.loc[(t.width - 1.0).abs().idxmin()]
    t["flops_vs_width1"] = t.gflops_per_img / base.gflops_per_img
    t["width_sq_vs_width1"] = (t.width / base.width) ** 2
    return t


def throughput_table(sweep, peak_tflops: float):
    """One row per ok sweep point: img/s, latency, TFLOP/s and its share of ``peak_tflops``
    (``peak_frac``)."""
    cols = ["width", "batch", "backend", "precision", "layout", "img_per_s", "median_ms"]
    t = ok_rows(sweep)[cols + ["iqr_ms", "tflops"]].copy()
    t["peak_frac"] = t.tflops / peak_tflops
    return t.sort_values(["backend", "batch", "width"]).reset_index(drop=True)


def img_per_s_grid(table):
    """img/s of a :func:`throughput_table`: a row per batch, a column per backend and width."""
    return table.pivot_table(index="batch", columns=["backend", "width"], values="img_per_s").round(
        0
    )


# ---- occupancy per width (Nsight Compute) -----------------------------------------------------


def width_occupancy(ncu):
    """Per config of an ncu table (label parsed): kernels, time, time-weighted occupancy, SM
    coverage, tensor-core share."""
    out = with_config(layer_view(ncu, by=("config",)))
    return out.sort_values(["width", "batch"]).reset_index(drop=True)


#: the columns of :func:`width_occupancy` a notebook shows
OCCUPANCY_COLUMNS = (
    "width", "kernels", "time_us", "theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct",
    "sm_coverage_tw", "tensor_core_time_share")  # fmt: skip


def class_occupancy(ncu):
    """Per config and kernel class: kernels, time, its share and time-weighted occupancy."""
    k = with_kernel_class(ncu)
    out = time_weighted(k, ["config", "kernel_class"])
    out["time_share"] = out.time_us / out.groupby("config").time_us.transform("sum")
    return with_config(out).sort_values(["width", "kernel_class"]).reset_index(drop=True)


def speed_vs_occupancy(table, occ, *, batch: int = 8, backend: str = GRAPH_BACKEND):
    """Per width at one batch and backend: throughput beside the ncu capture's occupancy and kernel
    time."""
    t = table[(table.batch == batch) & (table.backend == backend)]
    o = occ[occ.batch == batch] if "batch" in occ else occ
    cols = [
        "width", "time_us", "theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct",
        "sm_coverage_tw", "tensor_core_time_share"]  # fmt: skip
    out = t[["width", "img_per_s", "median_ms", "tflops", "peak_frac"]].merge(
        o[cols], on="width", how="inner"
    )
    out = out.rename(columns={"time_us": "ncu_kernel_time_us"})
    return out.sort_values("width").reset_index(drop=True)


# ---- the wide conv stack -----------------------------------------------------------------------


def wide_stack_table(ncu):
    """The wide conv stack per width and kernel family: time, occupancy, tensor pipe, block limits,
    ``limiter``, grid, waves."""
    keys = ["config", "kernel_class", "block_size", "registers_per_thread",
            "shared_mem_per_block_bytes"]  # fmt: skip
    k = with_kernel_class(ncu)
    cols = ("theoretical_occupancy_pct", "achieved_occupancy_pct", "tensor_pipe_pct")
    g = k.groupby(keys, observed=True)
    extra = g.agg(
        grid_min=("grid_size", "min"),
        grid_max=("grid_size", "max"),
        waves_max=("waves_per_sm", "max"),
        **{c: (c, "min") for c in LIMITS},
    )
    out = time_weighted(k, keys, cols).merge(extra.reset_index(), on=keys)  # fmt: skip
    out["time_share"] = out.time_us / out.groupby("config").time_us.transform("sum")
    out["limiter"] = binding(out).apply(lambda r: " = ".join(r.index[r]), axis=1)
    out["shared_mem_kib"] = out.shared_mem_per_block_bytes / 1024
    out["kernel_family"] = (
        out.kernel_class + " · " + out.block_size.astype(int).astype(str) + " thr · "
        + out.registers_per_thread.astype(int).astype(str) + " reg · "
        + out.shared_mem_kib.round(1).astype(str) + " KiB"
    )  # fmt: skip
    out = with_config(out)
    return out.sort_values(["width", "time_us"], ascending=[True, False]).reset_index(drop=True)


#: the columns of :func:`wide_stack_table` a notebook shows
WIDE_STACK_COLUMNS = (
    "width",
    "kernel_class",
    "block_size",
    "registers_per_thread",
    "shared_mem_kib",
    "kernels",
    "time_share",
    "theoretical_occupancy_tw_pct",
    "achieved_occupancy_tw_pct",
    "tensor_pipe_tw_pct",
    *LIMITS,
    "limiter",
    "grid_max",
    "waves_max",
)


def dominant_kernel(wide, kernel_class: str = "tensor_core_conv"):
    """Per width, the kernel family of ``kernel_class`` that takes the most time."""
    main = wide[wide.kernel_class == kernel_class]
    if main.empty:
        return main
    return main.loc[main.groupby("width").time_us.idxmax()].sort_values("width")


# ---- a model's channel table (the model_layers dataset) ---------------------------------------

CHANNEL_COLUMNS = (
    "layer", "module_type", "stage", "requested_channels", "out_channels", "rounded", "capped",
    "flops")  # fmt: skip


def channel_table(model_layers, *, family: str, width: float, max_channels: int | None = None):
    """One model's layers of ``model_layers``: requested and real channels, ``rounded``, ``capped``,
    FLOPs."""
    m = model_layers[(model_layers.family == family) & ((model_layers.width - width).abs() < 1e-9)]
    if max_channels is not None and "max_channels" in m:
        m = m[m.max_channels == max_channels]
    cols = [c for c in CHANNEL_COLUMNS if c in m]
    return m[cols].reset_index(drop=True)


# ---- the standard presets (yolov8 / yolo11 n-x) ----------------------------------------------

PRESET_ORDER = "nsmlx"


def presets_table(sweep, peak_tflops: float):
    """One row per preset point: its settings, GFLOPs per image, img/s, TFLOP/s, share of peak,
    status."""
    cols = ["family", "scale", "width", "depth", "precision", "backend", "batch", "status"]
    extra = [c for c in ("prov_date_utc",) if c in sweep]
    t = sweep[cols + ["message", "flops_per_img", "img_per_s", "median_ms", "tflops", *extra]]
    t = t.copy()
    t["gflops_per_img"] = t.flops_per_img / 1e9
    t["peak_frac"] = t.tflops / peak_tflops
    t["_o"] = t.scale.map({s: i for i, s in enumerate(PRESET_ORDER)})
    t = t.sort_values(["family", "precision", "backend", "batch", "_o"])
    return t.drop(columns=["_o", "flops_per_img"]).reset_index(drop=True)


def presets_grid(presets):
    """img/s of a :func:`presets_table`: a row per family and preset, a column per precision,
    backend, batch."""
    return presets.pivot_table(
        index=["family", "scale"],
        columns=["precision", "backend", "batch"],
        values="img_per_s",
        sort=False,
    ).round(0)


def preset_inversions(presets):
    """The ok points that ran more img/s than the next cheaper preset, with whether the host set
    either's pace."""
    keys = ["family", "precision", "backend", "batch"]
    ok = presets[presets.status == "ok"]
    ok = ok.assign(host=host_bound(ok) if len(ok) else False)
    ok = ok.sort_values([*keys, "gflops_per_img"])
    prev = ok.groupby(keys)[["scale", "img_per_s", "host"]].shift(1)
    hit = ok.img_per_s > prev.img_per_s
    out = ok.loc[hit, [*keys, "scale", "img_per_s"]].copy()
    out["cheaper_scale"], out["cheaper_img_per_s"] = prev.scale[hit], prev.img_per_s[hit]
    out["host_bound"] = (ok.host.astype(bool) | prev.host.astype(bool))[hit]
    return out.reset_index(drop=True)


# ---- torch.compile per width (from the fast-engines bench) -----------------------------------

COMPILE_VARIANTS = {
    "cudagraph/fp16/nhwc": "CUDA graph",
    "compile/fp16/nhwc": "compile",
    "compile:reduce-overhead/fp16/nhwc": "compile reduce-overhead",
}


def compile_by_width(bench):
    """Per width and batch of the bench: eager img/s, ``eager_host_bound``, and compile / CUDA graph
    over eager."""
    ok = ok_rows(bench)
    ok = ok[ok["scope"] == "model_only"] if "scope" in ok else ok
    base_rows = ok[ok.variant == BASELINE]
    base = base_rows.set_index(["width", "batch"])["img_per_s"]
    bound = pd.Series(host_bound(base_rows).to_numpy(), index=base.index, dtype="boolean")
    eng = ok[ok.variant.isin(list(COMPILE_VARIANTS))]
    wide = eng.pivot_table(index=["width", "batch"], columns="variant", values="vs_baseline")
    wide = wide.reindex(columns=[v for v in COMPILE_VARIANTS if v in wide.columns])
    wide = wide.rename(columns=COMPILE_VARIANTS).rename_axis(columns=None)
    out = wide.join(base.rename("eager_img_per_s"), how="outer")
    out = out.join(bound.rename("eager_host_bound"), how="left").reset_index()
    out = out.sort_values(["batch", "width"], ignore_index=True)
    ratios = [c for c in out.columns if c in COMPILE_VARIANTS.values()]
    return out[["width", "batch", "eager_img_per_s", "eager_host_bound", *ratios]]


def eager_drift(compiled, sweep):
    """The bench's eager img/s over the width sweep's (another run) where neither was host-bound:
    ``ratio``."""
    e = ok_rows(sweep)
    e = e[(e.backend == "eager") & (e.precision == "fp16") & (e.layout == "nhwc")]
    e = e[~host_bound(e)]
    if "eager_host_bound" in compiled:
        compiled = compiled[~compiled.eager_host_bound.fillna(True).astype(bool)]
    j = compiled.merge(e[["width", "batch", "img_per_s"]], on=["width", "batch"])
    return j.assign(ratio=j.eager_img_per_s / j.img_per_s)[["width", "batch", "ratio"]]


# ---- facts --------------------------------------------------------------------------------------


def _range(s) -> float:
    """max - min, rounded to 1e-9 (time-weighted means of equal values differ in the last bits)."""
    return round(float(s.max() - s.min()), 9) if len(s) else math.nan


def _ends(s):
    """(first, last) of a Series sorted by its index; NaNs when it holds fewer than 2 rows."""
    s = s.sort_index()
    return (float(s.iloc[0]), float(s.iloc[-1])) if len(s) >= 2 else (math.nan, math.nan)


# fmt: off
def throughput_facts(table, *, peak: float, batch: int = BATCH, dataset: str = SWEEP) -> list[dict]:
    """Widest over narrowest img/s and TFLOP/s (CUDA graph), best share of ``peak``, batch-1 eager
    spread."""
    ds = (dataset,)
    g = table[(table.batch == batch) & (table.backend == GRAPH_BACKEND)].set_index("width")
    (i0, i1), (t0, t1) = _ends(g.img_per_s), _ends(g.tflops)
    best = table.tflops.max() if len(table) else math.nan
    out = [fact("img_per_s_widest_over_narrowest", i1 / i0, "x", datasets=ds),
           fact("tflops_widest_over_narrowest", t1 / t0, "x", datasets=ds),
           fact("best_share_of_fp16_ceiling", 100 * best / peak, "%", datasets=(*ds, CEILINGS))]
    e = table[(table.batch == 1) & (table.backend == "eager")].groupby("width").img_per_s.mean()
    if len(e):
        out.append(fact("batch1_eager_spread", e.max() / e.min(), "x", datasets=ds))
    return out


def occupancy_facts(occ, cls, dataset: str = NCU_WIDTH) -> list[dict]:
    """Narrowest-to-widest change of achieved occupancy, SM coverage and tensor-core conv occupancy
    / share."""
    ds = (dataset,)
    o = occ[occ.batch == BATCH].set_index("width")
    tc = cls[(cls.kernel_class == "tensor_core_conv") & (cls.batch == BATCH)].set_index("width")
    (a0, a1), (s0, s1) = _ends(o.achieved_occupancy_tw_pct), _ends(tc.time_share)
    c0, c1 = _ends(o.sm_coverage_tw)
    return [fact("width_achieved_occupancy_change", a1 - a0, "pp", datasets=ds),
            fact("tensor_core_conv_theoretical_range", _range(tc.theoretical_occupancy_tw_pct),
                 "pp", datasets=ds),
            fact("tensor_core_conv_share_change", 100 * (s1 - s0), "pp", datasets=ds),
            fact("width_sm_coverage_change", 100 * (c1 - c0), "pp", datasets=ds)]


def wide_stack_facts(wide, dataset: str = NCU_WIDE) -> list[dict]:
    """The dominant tensor-core conv's block sizes over the widths and its tensor-pipe change."""
    m = dominant_kernel(wide).set_index("width")
    lo, hi = _ends(m.tensor_pipe_tw_pct)
    return [] if m.empty else [
        fact("wide_main_block_sizes", m.block_size.nunique(), "block sizes", datasets=(dataset,)),
        fact("wide_main_tensor_pipe_change", hi - lo, "pp", datasets=(dataset,))]


def presets_facts(presets, dataset: str = PRESETS) -> list[dict]:
    """Preset inversions not host-bound; per family costliest over cheapest TFLOP/s."""
    ds, inv, ok = (dataset,), preset_inversions(presets), presets[presets.status == "ok"]
    unbound = int((~inv.host_bound.astype(bool)).sum())
    out = [fact("presets_inversions_not_host_bound", unbound, "points", datasets=ds,
                points=len(ok))]
    big = ok[(ok.batch == ok.batch.max()) & (ok.backend == GRAPH_BACKEND)
             & (ok.precision == "fp16")]
    for fam, g in big.groupby("family"):
        t = g.sort_values("gflops_per_img").tflops
        if len(t) >= 2:
            out.append(fact("presets_tflops_costliest_over_cheapest", t.iloc[-1] / t.iloc[0], "x",
                            scope=f"family={fam}", datasets=ds))
    return out
# fmt: on


def compile_facts(compiled, sweep=None, *, dataset: str = BENCH) -> list[dict]:
    """Compile's gain widest over narrowest, CUDA graph over compile (both batch ends), bench vs
    sweep drift (%)."""
    ds = (dataset,)
    if compiled.empty or not {"compile", "CUDA graph"} <= set(compiled):
        return []
    both = compiled.dropna(subset=["compile", "CUDA graph"])
    big = both[both.batch == compiled.batch.max()].set_index("width").sort_index()
    small = both[both.batch == compiled.batch.min()]
    lo, hi = _ends(big.compile)
    out = [fact("compile_gain_widest_over_narrowest", hi / lo, "x", datasets=ds)]
    if len(big):
        ratio = (big["CUDA graph"] / big.compile).max()
        out.append(fact("graph_over_compile_max_large_batch", ratio, "x", datasets=ds))
    if len(small):
        ratio = small["CUDA graph"].median() / small.compile.median()
        out.append(fact("graph_over_compile_small_batch", ratio, "x", datasets=ds))
    d = eager_drift(compiled, sweep) if sweep is not None else []
    if len(d):
        dev = 100 * (d.ratio - 1).abs().max()
        out.append(fact("bench_vs_sweep_eager_max_dev", dev, "%", datasets=(*ds, SWEEP)))
    return out


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    batch1_eager_spread bench_vs_sweep_eager_max_dev
    best_share_of_fp16_ceiling compile_gain_widest_over_narrowest
    graph_over_compile_max_large_batch graph_over_compile_small_batch
    img_per_s_widest_over_narrowest presets_inversions_not_host_bound
    presets_tflops_costliest_over_cheapest
    tensor_core_conv_share_change tensor_core_conv_theoretical_range
    tflops_widest_over_narrowest wide_main_block_sizes wide_main_tensor_pipe_change
    width_achieved_occupancy_change width_sm_coverage_change
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The facts of notebook 01 that ``root``'s datasets give."""
    rows = []
    peak = peak_tflops(root)
    sweep = root.load(SWEEP) if root.has(SWEEP) else None
    if root.has(NCU_WIDTH):
        ncu = root.load(NCU_WIDTH)
        rows += occupancy_facts(width_occupancy(ncu), class_occupancy(ncu))
    if sweep is not None:
        rows += throughput_facts(throughput_table(sweep, peak), peak=peak)
    if root.has(NCU_WIDE):
        rows += wide_stack_facts(wide_stack_table(root.load(NCU_WIDE)))
    if root.has(PRESETS):
        rows += presets_facts(presets_table(root.load(PRESETS), peak))
    if root.has(BENCH):
        rows += compile_facts(compile_by_width(root.load(BENCH)), sweep)
    return facts_table(rows)

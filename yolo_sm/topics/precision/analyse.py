"""Precision (notebook 02): speed-ups, kernels and numerical error per precision, and facts."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.bench_table import load_present, ok_rows
from yolo_sm.analyse.facts import fact, facts_table, sm_clock_mhz
from yolo_sm.analyse.kernels import class_shares, with_kernel_class
from yolo_sm.analyse.weighting import same_run_ratio, time_weighted, weighted_mean
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import with_config
from yolo_sm.topics.precision.eight_bit import check_errors, facts_8bit, tolerance
from yolo_sm.topics.width.analyse import BENCH, GRAPH_BACKEND

MATMUL_CLASSES = ("tensor_core_conv", "simt_conv", "tensor_core_gemm", "simt_gemm")
PRECISION_ORDER = ("fp32", "tf32", "fp16", "bf16")
TENSOR_CORE_PRECISIONS = ("tf32", "fp16", "bf16")

# the datasets notebook 02 reads (short names inside a root)
SWEEPS = ("sweep_precision_core", "sweep_precision_rest")
SWEEP_FP16_NHWC = "sweep_fp16_nhwc"
SWEEP_BF16_NHWC = "sweep_bf16_nhwc"
NCU = "ncu_precision_w1"
NUMERICS = "numerics"
#: the sweeps whose rows carry a numerical check (``rel_err``) against eager fp32
CHECKED = (*SWEEPS, SWEEP_FP16_NHWC)
#: kernels at or above this theoretical occupancy count as high-occupancy (%)
HIGH_OCCUPANCY_PCT = 75.0
#: the bench variant whose numerical check is the GPU's fp8 error
FP8_VARIANT = "cudagraph/fp8/nhwc"
#: batches from here up check on the four calibration images (two photos, mirrored)
FP8_MIN_BATCH = 4
#: the batches the speed rules name: compute-bound with CUDA graphs, launch-bound in eager
LARGE_BATCH, SMALL_BATCH = 64, 1


def order_configs(df):
    """``df`` sorted fp32 -> tf32 -> fp16 -> bf16, NCHW before NHWC within a precision."""
    order = {p: i for i, p in enumerate(PRECISION_ORDER)}
    key = df.precision.map(order).fillna(99) * 10 + (df.layout == "nhwc")
    return df.assign(_k=key).sort_values("_k", kind="stable").drop(columns="_k")


def precision_speedup(sweep, *, baseline: str = "fp32"):
    """Same-run latency ratio ``baseline / precision`` per width, layout, batch and backend,
    with the two points' SM clock spread (%)."""
    index = ["width", "layout", "batch", "backend"]
    r = same_run_ratio(sweep, baseline=baseline, index=tuple(index))
    r = r.dropna(subset=["ratio"]).reset_index(drop=True)
    ok = ok_rows(sweep)
    if len(r):  # the SM clocks the two sides ran at (a ratio of clocks far apart says so)
        clk = ok.assign(_c=sm_clock_mhz(ok)).pivot_table(
            index=index, columns="precision", values="_c", aggfunc="mean"
        )
        if baseline not in clk:  # no clock recorded (a CPU): no spread to state
            return r.assign(clock_spread_pct=float("nan"))
        high = clk.drop(columns=[baseline]).clip(lower=clk[baseline], axis=0)
        spread = 100 * clk.drop(columns=[baseline]).sub(clk[baseline], axis=0).abs() / high
        spread = spread.reset_index().melt(
            id_vars=index, var_name="precision", value_name="clock_spread_pct"
        )
        r = r.merge(spread, on=[*index, "precision"], how="left")
    return r


def speedup_grid(ratios):
    """:func:`precision_speedup` per (backend, batch) and (precision, width)."""
    return ratios.pivot_table(
        index=["backend", "batch"], columns=["precision", "width"], values="ratio"
    ).round(2)


def ratio_by_width(ratios, *, precision: str, backend: str = GRAPH_BACKEND, min_batch: int = 16):
    """Median same-run ratio of ``precision`` per width over the batches from ``min_batch``."""
    r = ratios[
        (ratios.precision == precision) & (ratios.backend == backend) & (ratios.batch >= min_batch)
    ]
    return (
        r.groupby("width")
        .agg(ratio=("ratio", "median"), batches=("batch", "nunique"))
        .reset_index()
    )


def precision_forward(ncu):
    """Per config: kernels and time per forward, time-weighted occupancy (%), and the time
    shares of high-occupancy, SIMT, tensor-core and layout-transform kernels."""
    k = with_kernel_class(ncu)
    out = time_weighted(k, "config").set_index("config")
    t = k.groupby(["config", "kernel_class"]).duration_us.sum().unstack(fill_value=0.0)
    tot = t.sum(axis=1)
    tc = [c for c in t if c.startswith("tensor_core")]
    simt = [c for c in t if c.startswith("simt")]
    out["time_ms"] = out.time_us / 1e3
    hi = k[k.theoretical_occupancy_pct >= HIGH_OCCUPANCY_PCT].groupby("config").duration_us.sum()
    out["high_occupancy_share"] = hi.reindex(out.index, fill_value=0.0) / tot.reindex(out.index)
    out["tensor_core_share"] = t[tc].sum(axis=1) / tot
    out["simt_share"] = t[simt].sum(axis=1) / tot
    lt = t["layout_transform"] if "layout_transform" in t else 0.0
    out["layout_transform_share"] = lt / tot
    out["layout_transform_kernels"] = (
        k[k.kernel_class == "layout_transform"].groupby("config").size()
    ).reindex(out.index, fill_value=0)
    out = with_config(out.reset_index())
    return order_configs(out).reset_index(drop=True)


#: the columns of :func:`precision_forward` a notebook shows
FORWARD_COLUMNS = tuple(
    "precision layout kernels time_ms theoretical_occupancy_tw_pct achieved_occupancy_tw_pct "
    "simt_share tensor_core_share layout_transform_share layout_transform_kernels "
    "high_occupancy_share".split()
)


def precision_class_shares(ncu):
    """Share of kernel time per kernel class per config, configs in precision order."""
    s = with_config(class_shares(ncu, by=["config"]))
    return order_configs(s).reset_index(drop=True)


def precision_matmul(ncu):
    """Conv and GEMM kernels per config, class and operand type: time, time-weighted occupancy,
    registers and shared memory (KiB)."""
    k = with_kernel_class(ncu)
    mm = k[k.kernel_class.isin(MATMUL_CLASSES)]
    out = time_weighted(
        mm,
        ["config", "kernel_class", "kernel_precision"],
        (
            "theoretical_occupancy_pct",
            "achieved_occupancy_pct",
            "registers_per_thread",
            "shared_mem_per_block_bytes",
        ),
    )
    out["shared_mem_per_block_kib_tw"] = out.pop("shared_mem_per_block_bytes_tw") / 1024
    out = with_config(out)
    return order_configs(out).reset_index(drop=True)


#: the columns of :func:`precision_matmul` a notebook shows
MATMUL_COLUMNS = tuple(
    "precision layout kernel_class kernel_precision kernels time_us registers_per_thread_tw "
    "shared_mem_per_block_kib_tw theoretical_occupancy_tw_pct achieved_occupancy_tw_pct".split()
)


def precision_layer_delta(ncu, a: str = "bf16", b: str = "fp16", layout: str = "nhwc"):
    """Per layer: kernel time (us) in ``a`` and ``b``, ``delta_us`` = a - b and the kernel
    classes each ran, largest delta first."""
    k = with_config(with_kernel_class(ncu))
    k = k[k.layout == layout]
    cols = ["layer", f"{a}_us", f"{b}_us", "delta_us", f"classes_{a}", f"classes_{b}"]
    if not {a, b} <= set(k.precision):
        return pd.DataFrame(columns=cols)
    out = {}
    for prec in (a, b):
        g = k[k.precision == prec].groupby("layer")
        out[f"{prec}_us"] = g.duration_us.sum()
        out[f"classes_{prec}"] = g.kernel_class.agg(lambda c: "+".join(sorted(set(c))))
    t = pd.DataFrame(out).reset_index()
    t["delta_us"] = t[f"{a}_us"].fillna(0.0) - t[f"{b}_us"].fillna(0.0)
    t = t.sort_values("delta_us", ascending=False, key=abs).reset_index(drop=True)
    return t[cols]


def error_table(*sweeps):
    """Per precision and layout: points, median and max ``rel_err``, tolerance and headroom."""
    d = pd.concat([ok_rows(s) for s in sweeps if s is not None], ignore_index=True)
    out = (
        d.groupby(["precision", "layout"])
        .rel_err.agg(points="size", median="median", max="max")
        .reset_index()
    )
    out["tolerance"] = out.precision.map(tolerance)
    out["headroom"] = out.tolerance / out["max"].where(out["max"] > 0)
    return order_configs(out).reset_index(drop=True)


def numerics_summary(numerics):
    """Per precision on random inputs, as built: points, median and max ``rel_err``, tolerance."""
    d = numerics[numerics["input"] == "random"]
    if "class_prior" in d:
        d = d[~d.class_prior.astype(bool)]
    out = d.groupby("precision").rel_err.agg(points="size", median="median", max="max")
    out = out.reset_index()
    out["tolerance"] = out.precision.map(tolerance)
    return out


def bench_check_errors(bench, variant: str = FP8_VARIANT, min_batch: int = FP8_MIN_BATCH):
    """Per width: the range of ``variant``'s check error over the batches from ``min_batch``
    (smaller ones check fewer photos) and how many failed."""
    cols = ["width", "gpu_err_min", "gpu_err_max", "failed", "batches"]
    b = bench[(bench.variant == variant) & (bench.batch >= min_batch)].copy()
    if b.empty:
        return pd.DataFrame(columns=cols)
    b["err"] = check_errors(b)
    b = b[b.err.notna()]  # rows that failed otherwise (out of memory, ...) carry no error
    b["over"] = b.status != "ok"
    return b.groupby("width").agg(
        gpu_err_min=("err", "min"), gpu_err_max=("err", "max"), failed=("over", "sum"),
        batches=("batch", lambda x: ", ".join(f"{v:g}" for v in sorted(set(x)))),
    ).reset_index()  # fmt: skip


def fp8_error_table(numerics, bench=None):
    """Per width on photos: each precision's error as built and with the class prior, and with
    ``bench`` the GPU fp8 engine's check (:func:`bench_check_errors`)."""
    d = numerics[numerics["input"] == "photo"]
    wide = d.pivot_table(index="width", columns=["class_prior", "precision"], values="rel_err")
    wide.columns = [f"{p}{', class prior' if prior else ''}" for prior, p in wide.columns]
    order = [c for c in ("fp16", "bf16", "fp8") if c in wide]
    order += [c for c in wide.columns if c not in order]
    out = wide[order].reset_index()
    if bench is not None:
        g = bench_check_errors(bench).set_index("width")
        names = {"gpu_err_min": "fp8 engine, min", "gpu_err_max": "fp8 engine, max",
                 "failed": "engine batches over tolerance",
                 "batches": "engine batches"}  # fmt: skip
        out = out.join(g[list(names)], on="width").rename(columns=names)
    return out


def speedup_facts(ratios, *, dataset=SWEEPS) -> list[dict]:
    """Per tensor-core precision: smallest CUDA-graph speed-up at :data:`LARGE_BATCH` and
    median eager one at :data:`SMALL_BATCH`, with their clock spread."""
    ds = tuple(dataset) if not isinstance(dataset, str) else (dataset,)
    out = []
    for prec in TENSOR_CORE_PRECISIONS:
        s = ratios[ratios.precision == prec]
        g = s[(s.backend == GRAPH_BACKEND) & (s.batch == LARGE_BATCH)]
        e = s[(s.backend == "eager") & (s.batch == SMALL_BATCH)]
        for key, t, v in (("speedup_b64_min", g, g.ratio.min()),
                          ("speedup_eager_b1", e, e.ratio.median())):  # fmt: skip
            if len(t):
                out.append(fact(key, v, "x", scope=f"precision={prec}", datasets=ds,
                                clock_spread_pct=t.clock_spread_pct.max()))  # fmt: skip
    return out


def kernel_facts(fwd, matmul, *, dataset=NCU) -> list[dict]:
    """fp32 NCHW against fp16 NHWC from Nsight Compute: SIMT shares, kernel time, occupancy
    changes and layout-transform shares."""
    ds, f, out = (dataset,), fwd.set_index(fwd.precision + "_" + fwd.layout), []

    def add(key, v, unit="%"):
        out.append(fact(key, v, unit, datasets=ds))

    for c in ("fp32_nchw", "fp16_nhwc"):
        if c in f.index:
            add(f"simt_share_{c}", 100 * f.loc[c, "simt_share"])
    tc = matmul[(matmul.precision == "fp16") & (matmul.layout == "nhwc")
                & (matmul.kernel_class == "tensor_core_conv")]  # fmt: skip
    if len(tc):
        add("tensor_core_conv_theoretical_fp16_nhwc", weighted_mean(
            tc.theoretical_occupancy_tw_pct, tc.time_us))  # fmt: skip
    if {"fp32_nchw", "fp16_nhwc"} <= set(f.index):
        a, b = f.loc["fp32_nchw"], f.loc["fp16_nhwc"]
        add("kernel_time_fp32_nchw_over_fp16_nhwc", a.time_us / b.time_us, "x")
        add("achieved_occupancy_fp16_nhwc_minus_fp32_nchw",
            b.achieved_occupancy_tw_pct - a.achieved_occupancy_tw_pct, "pp")  # fmt: skip
        add("high_occupancy_share_fp16_nhwc_minus_fp32_nchw",
            100 * (b.high_occupancy_share - a.high_occupancy_share), "pp")  # fmt: skip
    nhwc = [f"{p}_nhwc" for p in TENSOR_CORE_PRECISIONS if f"{p}_nhwc" in f.index]
    if nhwc:
        add("layout_transform_share_tensor_core_nhwc_max",
            100 * f.loc[nhwc, "layout_transform_share"].max())  # fmt: skip
    if "fp32_nhwc" in f.index:
        add("layout_transform_share_fp32_nhwc", 100 * f.loc["fp32_nhwc", "layout_transform_share"])
    return out


def pair_facts(ratios, delta, *, a="bf16", b="fp16") -> list[dict]:
    """``a`` against ``b`` in NHWC: median ratio's distance from 1 (%), kernel-time difference,
    the top layer's share of it and the layers changing kernel class."""
    out, ds = [], (NCU,)
    r = ratios[ratios.precision == a] if ratios is not None else None
    if r is not None and len(r):
        dev = 100 * abs(r.ratio.median() - 1)
        out.append(fact(f"{a}_vs_{b}_median_ratio_dev", dev, "%", datasets=(SWEEP_BF16_NHWC,)))
    if delta is not None and len(delta):
        ta, tb = delta[f"{a}_us"].sum(), delta[f"{b}_us"].sum()
        share = 100 * delta.delta_us.iloc[0] / (ta - tb) if ta != tb else math.nan
        changed = int((delta[f"classes_{a}"] != delta[f"classes_{b}"]).sum())
        out += [
            fact(f"{a}_vs_{b}_kernel_time_dev", 100 * abs(ta / tb - 1), "%", datasets=ds),
            fact(f"{a}_vs_{b}_top_layer_share_of_diff", share, "%", datasets=ds),
            fact(f"{a}_vs_{b}_layers_changing_class", changed, "layers", datasets=ds,
                 points=len(delta)),
        ]  # fmt: skip
    return out


def error_facts(checked, *, dataset=CHECKED) -> list[dict]:
    """The sweeps' largest error over tolerance (rejected points too) and bf16's median error
    over fp16's in NCHW."""
    ds = tuple(dataset)
    over = check_errors(checked) / checked.precision.map(tolerance)
    out = [fact("gpu_error_over_tolerance_max", over.max(), "x", datasets=ds)]
    med = error_table(checked)
    med = med[med.layout == "nchw"].set_index("precision")["median"]
    if {"bf16", "fp16"} <= set(med.index):
        out.append(fact("bf16_over_fp16_median_error", med["bf16"] / med["fp16"], "x", datasets=ds))
    return out


def numerics_facts(numerics, bench=None) -> list[dict]:
    """Errors over tolerance (random inputs; fp8 on photos), the narrowest width's error over
    the next one's, and the GPU fp8 engine's deviation from the emulation (%)."""
    ds, out = (NUMERICS,), []
    s = numerics_summary(numerics)
    if len(s):
        v = (s["max"] / s.tolerance).max()
        out.append(fact("numerics_error_over_tolerance_max", v, "x", datasets=ds))
    t = fp8_error_table(numerics, bench).sort_values("width").set_index("width")
    tol, prior, engine = tolerance("fp8"), "fp8, class prior", "fp8 engine, max"
    for col, key in (("fp8", "fp8_error"), (prior, "fp8_prior_error")):
        if col in t:
            out.append(fact(f"{key}_over_tolerance_max", t[col].max() / tol, "x", datasets=ds))
    if prior in t and engine in t:
        both = t.dropna(subset=[prior, engine])
        dev = pd.concat([both[engine] / both[prior], both["fp8 engine, min"] / both[prior]])
        if len(dev):
            v = 100 * (dev - 1).abs().max()
            out.append(fact("fp8_engine_vs_emulation_max_dev", v, "%", datasets=(*ds, BENCH)))
    cols = [c for c in ("fp16", "bf16", "fp8") if c in t]
    if cols and len(t) >= 2:
        amp = min(t.iloc[0][c] / t.iloc[1][c] for c in cols)
        out.append(fact("narrowest_error_amplification_min", amp, "x", datasets=ds))
    return out


def fp8_bench_facts(bench) -> list[dict]:
    """The GPU fp8 engine's batches over the fp8 tolerance in the bench."""
    g = bench_check_errors(bench)
    if g.empty:
        return []
    n = int(g.failed.sum())
    return [fact("fp8_engine_batches_over_tolerance", n, "batches", datasets=(BENCH,))]


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    achieved_occupancy_fp16_nhwc_minus_fp32_nchw bench_engines_failed
    bf16_over_fp16_median_error bf16_vs_fp16_kernel_time_dev bf16_vs_fp16_layers_changing_class
    bf16_vs_fp16_median_ratio_dev bf16_vs_fp16_top_layer_share_of_diff engine_fallbacks_max
    fp8_conv_occupancy_gap_max fp8_engine_batches_over_tolerance fp8_engine_vs_emulation_max_dev
    fp8_error_over_tolerance_max fp8_prior_error_over_tolerance_max gpu_error_over_tolerance_max
    high_occupancy_share_fp16_nhwc_minus_fp32_nchw int8_box_match_min
    int8_conv_occupancy_gap_max int8_conv_over_fp16_conv_max int8_error_over_tolerance_max
    int8_kernels.best_over_cudnn_min int8_kernels.best_over_fp16_min int8_kernels.conv_error_max
    int8_kernels.cudnn_peak_of_int8_ceiling_pct int8_kernels.fused_over_prequant_min
    int8_kernels.intmm_over_cudnn_min int8_kernels.model_intmm_over_cudnn_min
    int8_kernels.model_triton_over_cudnn_min int8_kernels.triton_over_cudnn_min
    int8_kernels.triton_peak_of_int8_ceiling_pct int8_percentile_over_max_error
    int8_quantise_over_saving_max int8_unchanged_pct_min kernel_time_fp32_nchw_over_fp16_nhwc
    layout_transform_share_fp32_nhwc layout_transform_share_tensor_core_nhwc_max
    narrowest_error_amplification_min numerics_error_over_tolerance_max simt_share_fp16_nhwc
    simt_share_fp32_nchw speedup_eager_b1 speedup_b64_min tensor_core_conv_theoretical_fp16_nhwc
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The facts of notebook 02 from the datasets ``root`` holds."""
    rows = []
    sweep = load_present(root, SWEEPS)
    checked = load_present(root, CHECKED)
    bench = root.load(BENCH) if root.has(BENCH) else None
    if sweep is not None and (sweep.precision == "fp32").any():
        rows += speedup_facts(precision_speedup(sweep), dataset=sweep.attrs["datasets"])
    if checked is not None:
        rows += error_facts(checked, dataset=checked.attrs["datasets"])
    delta = None
    if root.has(NCU):
        ncu = root.load(NCU)
        rows += kernel_facts(precision_forward(ncu), precision_matmul(ncu))
        delta = precision_layer_delta(ncu, "bf16", "fp16", layout="nhwc")
    pair = None
    if root.has(SWEEP_BF16_NHWC):
        pair = precision_speedup(root.load(SWEEP_BF16_NHWC), baseline="fp16")
    rows += pair_facts(pair, delta)
    if root.has(NUMERICS):
        rows += numerics_facts(root.load(NUMERICS), bench)
    if bench is not None:
        rows += fp8_bench_facts(bench)
    rows += facts_8bit(root)  # FP16, INT8 and FP8 side by side
    return facts_table(rows)

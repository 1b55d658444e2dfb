"""Which int8 convolution kernel is fastest (notebook 02), from ``int8_kernels``; two kernels are
compared over the convolutions both ran (``intmm`` runs the 1x1 ones only)."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.hardware import ceiling

INT8_KERNELS = "int8_kernels"
#: the int8 kernels of a conv row (the fp16 rows are the baseline)
INT8 = ("cudnn", "intmm", "triton", "triton_prequant")
#: the kernel every other is compared with: cuDNN's int8 graphs (the int8 engine's default)
REFERENCE = "cudnn"
INT8_CEILING = "matmul_int8"


def conv_class(df: pd.DataFrame) -> pd.Series:
    """``1x1``, ``3x3`` or ``3x3 s2`` per conv row."""
    k = df["kernel_size"].astype(int).astype(str)
    s = df["stride"].astype(int)
    return (k + "x" + k).where(s == 1, k + "x" + k + " s" + s.astype(str))


def conv_times(df: pd.DataFrame) -> pd.DataFrame:
    """Per (width, batch, convolution): ``<kernel>_ms`` of each kernel, and the fastest int8 one."""
    conv = df[(df.scope == "conv") & (df.status == "ok")].copy()
    if conv.empty:
        return pd.DataFrame()
    conv["conv_class"] = conv_class(conv)
    keys = ["width", "batch", "index", "layer", "conv_class", "in_channels", "out_channels"]
    keys += ["in_h", "ops"]
    wide = conv.pivot_table(index=keys, columns="kernel", values="median_ms", aggfunc="first")
    wide.columns = [f"{k}_ms" for k in wide.columns]
    wide = wide.reset_index()
    int8 = [f"{k}_ms" for k in INT8 if f"{k}_ms" in wide]
    if int8:
        best = wide[int8].idxmin(axis=1, skipna=True)
        wide["best_int8"] = best.str.removesuffix("_ms")
        wide["best_ms"] = wide[int8].min(axis=1)
    return wide.sort_values(["width", "batch", "index"]).reset_index(drop=True)


def _ratio(g: pd.DataFrame, base: str, other: str) -> float:
    """sum(base ms) / sum(other ms) over the rows both ran (>1: ``other`` is faster)."""
    a, b = f"{base}_ms", f"{other}_ms"
    if a not in g or b not in g:
        return math.nan
    both = g[g[a].notna() & g[b].notna()]
    return float(both[a].sum() / both[b].sum()) if len(both) and both[b].sum() > 0 else math.nan


def kernel_totals(times: pd.DataFrame) -> pd.DataFrame:
    """Per (width, batch, kernel; ``best``: the fastest per convolution): convolutions, summed
    ms, fp16's and cuDNN's over it on the same convolutions, and how often it is fastest."""
    if times.empty:
        return pd.DataFrame()
    rows = []
    for (w, b), g in times.groupby(["width", "batch"]):
        for k in ("fp16", *INT8, "best"):
            col = f"{k}_ms"
            if col not in g or g[col].notna().sum() == 0:
                continue
            ran = g[g[col].notna()]
            rows.append(
                {
                    "width": w,
                    "batch": b,
                    "kernel": k,
                    "convs": len(ran),
                    "conv_ms": float(ran[col].sum()),
                    "fp16_over": _ratio(g, "fp16", k) if k != "fp16" else 1.0,
                    "cudnn_over": _ratio(g, REFERENCE, k),
                    "fastest_of": int((g.get("best_int8") == k).sum()) if k in INT8 else None,
                }
            )
    return pd.DataFrame(rows)


def class_totals(times: pd.DataFrame) -> pd.DataFrame:
    """Per (width, conv class): summed ms per kernel and fp16's over the best int8 choice."""
    if times.empty:
        return pd.DataFrame()
    cols = [c for c in times if c.endswith("_ms")]
    out = times.groupby(["width", "conv_class"])[cols].sum(min_count=1)
    out.insert(0, "convs", times.groupby(["width", "conv_class"]).size())
    out["fp16_over_best"] = out["fp16_ms"] / out["best_ms"]
    return out.reset_index()


def kernel_rates(df: pd.DataFrame, root: DataRoot | None = None) -> pd.DataFrame:
    """Per (width, kernel): median and peak TOP/s, and the peak's % of ``root``'s int8 ceiling."""
    conv = df[(df.scope == "conv") & (df.status == "ok")]
    if conv.empty:
        return pd.DataFrame()
    out = conv.groupby(["width", "kernel"]).tops.agg(median_tops="median", peak_tops="max")
    out = out.reset_index()
    top = ceiling(root, INT8_CEILING) if root is not None else None
    out["int8_ceiling_tops"] = top[0] if top else math.nan
    out["peak_of_int8_ceiling_pct"] = 100 * out.peak_tops / out.int8_ceiling_tops
    return out


def model_speed(df: pd.DataFrame) -> pd.DataFrame:
    """Model rows: img/s per (width, batch, kernel) over the fp16 graph's and cuDNN int8's."""
    m = df[df.scope == "model"].copy()
    if m.empty:
        return m
    cols = ["width", "batch", "kernel", "status", "img_per_s", "median_ms", "rel_err"]
    cols += [c for c in ("build_s", "quant_convs", "kernel_convs", "quant_fallbacks") if c in m]
    m = m[cols]
    ok = m[m.status == "ok"].set_index(["width", "batch", "kernel"]).img_per_s
    for col, base in (("vs_fp16", "fp16"), ("vs_cudnn", REFERENCE)):
        at = pd.MultiIndex.from_arrays([m.width, m.batch, [base] * len(m)])
        m[col] = m.img_per_s.to_numpy() / ok.reindex(at).to_numpy()
    return m.reset_index(drop=True)


def facts_of(df: pd.DataFrame, root: DataRoot | None = None) -> list[dict]:
    """The smallest ratio over the widths of :func:`kernel_totals` and :func:`model_speed`
    (``int8_kernels.<name>_min``), the largest error, and the peaks' % of the int8 ceiling."""
    ds = (INT8_KERNELS,)
    totals = kernel_totals(conv_times(df))
    pairs = {
        "triton_over_cudnn": ("triton", "cudnn_over"),
        "intmm_over_cudnn": ("intmm", "cudnn_over"),
        "best_over_fp16": ("best", "fp16_over"),
        "best_over_cudnn": ("best", "cudnn_over"),
    }
    by_width: dict[str, list[float]] = {}
    if not totals.empty:
        t = totals.set_index(["width", "kernel"])
        for w in sorted(totals.width.unique()):
            got = {name: _get(t, (w, k), col) for name, (k, col) in pairs.items()}
            fused = _get(t, (w, "triton"), "conv_ms")
            pre = _get(t, (w, "triton_prequant"), "conv_ms")
            got["fused_over_prequant"] = pre / fused if fused and fused > 0 else math.nan
            for name, v in got.items():
                by_width.setdefault(name, []).append(v)
    speed = model_speed(df)
    for k in ("triton", "intmm"):
        if len(speed):
            by_width[f"model_{k}_over_cudnn"] = list(
                speed[(speed.kernel == k) & (speed.status == "ok")].vs_cudnn
            )
    out = []
    for name, vals in by_width.items():
        vals = [v for v in vals if not math.isnan(v)]
        if vals:
            out.append(fact(f"int8_kernels.{name}_min", min(vals), "x", datasets=ds))
    if not totals.empty:
        conv = df[(df.scope == "conv") & df.kernel.isin(INT8) & (df.status == "ok")]
        out.append(fact("int8_kernels.conv_error_max", conv.rel_err.max(), "", datasets=ds))
    rates = kernel_rates(df, root)
    if not rates.empty and rates.int8_ceiling_tops.notna().any():
        for k, g in rates[rates.kernel.isin(("cudnn", "triton"))].groupby("kernel"):
            pct = float(g.peak_of_int8_ceiling_pct.max())
            key = f"int8_kernels.{k}_peak_of_int8_ceiling_pct"
            out.append(fact(key, pct, "%", datasets=(*ds, "ceilings")))
    return out


def _get(t: pd.DataFrame, key, col) -> float:
    try:
        v = t.loc[key, col]
    except KeyError:
        return math.nan
    return float(v) if v is not None and not pd.isna(v) else math.nan

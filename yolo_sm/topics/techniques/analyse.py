"""The ``techniques`` table side by side: each ratio is img/s of a variant over its baseline's at
the same backend and batch, measured in one process."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import class_shares

DATASET = "techniques"
FUSED, FOLDED, UNFUSED = "conv_bias_relu", "bn_folded", "bn_unfused"
FUSION_ORDER = (UNFUSED, FOLDED, FUSED)
#: the buffer variant the rules read: ``torch.stack(frames, out=buffer)``
STACK_OUT = "prealloc_stack_out"
#: kernel classes that do the matrix work (everything else is memory traffic around it)
MATRIX = ("tensor_core_conv", "simt_conv", "tensor_core_gemm", "simt_gemm")
_VARIANTS = (*FUSION_ORDER, "stack_new", "prealloc_copy", STACK_OUT)
_ORDER = {"none": 0, "eager": 1, "cudagraph": 2, "assembly": 0, "step": 1,
          **{v: i for i, v in enumerate(_VARIANTS)}}  # fmt: skip


def kernel_mix_of(kernels: pd.DataFrame | None, iters: int) -> dict:
    """Per call of a profiled function, from a Kineto kernel table over ``iters`` calls: kernels,
    kernel time (ms) and class shares (%); NaN without kernels."""
    keys = ("kernels_per_forward", "kernel_time_ms", "elementwise_kernels_per_forward",
            "elementwise_time_pct", "copy_time_pct", "matrix_time_pct")  # fmt: skip
    if kernels is None or not len(kernels) or iters < 1:
        return dict.fromkeys(keys, math.nan)
    t, cls = kernels["duration_us"].astype(float), kernels["kernel_class"]
    total = float(t.sum())

    def share(mask) -> float:
        return 100.0 * float(t[mask].sum()) / total if total > 0 else math.nan

    ew = cls == "elementwise"
    values = (len(kernels) / iters, total / 1e3 / iters, int(ew.sum()) / iters, share(ew),
              share(cls == "copy_concat"), share(cls.isin(MATRIX)))  # fmt: skip
    return dict(zip(keys, values, strict=True))


def class_time(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per kernel class: kernels, time (us) and its share (%), largest first."""
    g = class_shares(kernels).drop(columns="launch_share")
    g["time_pct"] = 100.0 * g.pop("time_share")
    return g.sort_values("time_pct", ascending=False, ignore_index=True)


def _rows(df: pd.DataFrame, technique: str, base: str | None, keys: list[str], cols: list[str]):
    """The ok rows of ``technique`` sorted for reading, ``ratio``: img/s over the ``base`` variant's
    at the same ``keys``."""
    t = df[(df.technique == technique) & (df.status == "ok")].copy()
    if base is not None:
        b = t[t.variant == base].set_index(keys).img_per_s.rename("base")
        t = t.join(b, on=keys)
        t["ratio"] = t.img_per_s / t.pop("base")
    t = t.sort_values([*keys, "variant"], key=lambda s: s.map(lambda v: _ORDER.get(v, v)))
    return t[[c for c in cols if c in t]].reset_index(drop=True)


def fusion_table(df: pd.DataFrame) -> pd.DataFrame:
    """Fusion rows: img/s, ``speedup`` over ``bn_unfused``, kernels, elementwise and matrix shares
    (%), error."""
    cols = ["backend", "batch", "variant", "img_per_s", "ratio", "median_ms",
            "kernels_per_forward", "elementwise_kernels_per_forward", "elementwise_time_pct",
            "matrix_time_pct", "rel_err", "bn_modules", "fused_conv_modules", "noisy"]  # fmt: skip
    t = _rows(df, "fusion", UNFUSED, ["backend", "batch"], cols)
    return t.rename(columns={"ratio": "speedup"})


def autocast_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per width, batch and backend: autocast and the half model side by side,
    ``autocast_over_half`` (img/s)."""
    a = df[(df.technique == "autocast") & (df.status == "ok")]
    cols = ["img_per_s", "rel_err", "kernels_per_forward", "copy_time_pct"]
    cols = [c for c in cols if c in a]
    w = a.pivot_table(index=["width", "batch", "backend"], columns="variant", values=cols,
                      aggfunc="first")  # fmt: skip
    w.columns = [f"{v}_{c}" for c, v in w.columns]
    w = w.reset_index()
    if {"autocast_img_per_s", "half_model_img_per_s"} <= set(w):
        w["autocast_over_half"] = w.autocast_img_per_s / w.half_model_img_per_s
    return w


def dtype_table(df: pd.DataFrame) -> pd.DataFrame:
    """The autocast dtype record per width and module type (fixed by autocast's op lists, not the
    GPU)."""
    d = df[(df.technique == "autocast_dtypes") & (df.status == "ok")]
    cols = ["width", "module_type", "calls", "fp32_output_calls", "upcast_calls"]
    return d[cols].sort_values(["width", "fp32_output_calls", "module_type"],
                               ascending=[True, False, True], ignore_index=True)  # fmt: skip


def buffer_table(df: pd.DataFrame) -> pd.DataFrame:
    """Batch-buffer rows: img/s, ms, ``gain_pct`` over ``stack_new``, launches, buffer kind."""
    cols = ["scope", "backend", "batch", "variant", "img_per_s", "median_ms", "ratio",
            "launches_per_forward", "static_buffer", "graph_input_copy", "noisy"]  # fmt: skip
    t = _rows(df, "batch_buffer", "stack_new", ["scope", "backend", "batch"], cols)
    t["ratio"] = 100.0 * (t.ratio - 1.0)
    return t.rename(columns={"ratio": "gain_pct"})


def failures(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that did not run or failed their check, and why."""
    cols = ["technique", "model", "variant", "backend", "scope", "batch", "status", "message"]
    return df.loc[df.status != "ok", [c for c in cols if c in df]].reset_index(drop=True)


def scope(backend: str, batch) -> str:
    """The scope of a per-backend, per-batch fact."""
    return f"backend={backend},batch={int(batch)}"


def facts(root) -> pd.DataFrame:
    """Per backend and batch: fusion speed-ups (x), elementwise drop (pp), autocast over half (x),
    buffer gains (%)."""
    if not root.has(DATASET):
        return facts_table([])
    df, ds, rows = root.load(DATASET), (DATASET,), []

    def add(key, value, unit, backend, batch):
        rows.append(fact(f"techniques.{key}", value, unit, scope=scope(backend, batch),
                         datasets=ds))  # fmt: skip

    for (back, b), g in fusion_table(df).groupby(["backend", "batch"]):
        by = g.set_index("variant").reindex(FUSION_ORDER)
        add("fusion_speedup", by.speedup[FUSED], "x", back, b)
        add("bn_fold_speedup", by.speedup[FOLDED], "x", back, b)
        drop = by.elementwise_time_pct[UNFUSED] - by.elementwise_time_pct[FUSED]
        add("fusion_elementwise_drop_pct", drop, "pp", back, b)
    a = autocast_table(df)
    for (back, b), g in a.groupby(["backend", "batch"]) if "autocast_over_half" in a else ():
        add("autocast_over_half_median", g.autocast_over_half.median(), "x", back, b)
    buf = buffer_table(df)
    for (sc, back, b), g in buf[buf.variant == STACK_OUT].groupby(["scope", "backend", "batch"]):
        add(f"buffer_{sc}_gain_pct", g.gain_pct.item(), "%", back, b)
    return facts_table(r for r in rows if not math.isnan(r["value"]))


#: the facts :func:`facts` computes (a rule naming another fails to load)
FACT_KEYS = frozenset(
    f"techniques.{k}"
    for k in ("fusion_speedup", "bn_fold_speedup", "fusion_elementwise_drop_pct",
              "autocast_over_half_median", "buffer_assembly_gain_pct", "buffer_step_gain_pct")
)  # fmt: skip

"""The ``techniques`` table (:mod:`yolo_sm.topics.techniques.collect`) read side by side: what
fusing
conv + BN + ReLU, autocast against a half model, and a preallocated batch buffer each buy, and
the facts (keys ``techniques.*``) their rules decide.

Every ratio compares rows of one table, measured in one process: img/s of a variant over img/s
of its baseline at the same backend and batch (fusion: ``bn_unfused``; autocast: the half
model; batch buffer: ``stack_new``).
"""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import class_shares
from yolo_sm.contract.datasets import DataRoot

DATASET = "techniques"
FUSED, FOLDED, UNFUSED = "conv_bias_relu", "bn_folded", "bn_unfused"
FUSION_ORDER = (UNFUSED, FOLDED, FUSED)
PREALLOC = ("prealloc_copy", "prealloc_stack_out")
#: backends in reading order (``none``: the assembly rows, no forward)
BACKEND_ORDER = {"none": 0, "eager": 1, "cudagraph": 2}
#: kernel classes that do the matrix work (everything else is memory traffic around it)
MATRIX = ("tensor_core_conv", "simt_conv", "tensor_core_gemm", "simt_gemm")
_MIX_NAN = {
    "kernels_per_forward": math.nan,
    "kernel_time_ms": math.nan,
    "elementwise_kernels_per_forward": math.nan,
    "elementwise_time_pct": math.nan,
    "copy_time_pct": math.nan,
    "matrix_time_pct": math.nan,
}


def kernel_mix_of(kernels: pd.DataFrame | None, iters: int) -> dict:
    """Per call of a profiled function: kernels, kernel time (ms), elementwise kernels, and the
    shares (%) of kernel time in elementwise, copy/concat and matrix (conv, GEMM) kernels, from
    a Kineto kernel table with ``kernel_class`` and ``duration_us`` over ``iters`` calls. NaN
    without kernels (a CPU has none)."""
    if kernels is None or not len(kernels) or iters < 1:
        return dict(_MIX_NAN)
    t = kernels["duration_us"].astype(float)
    total = float(t.sum())
    cls = kernels["kernel_class"]

    def share(mask) -> float:
        return 100.0 * float(t[mask].sum()) / total if total > 0 else math.nan

    return {
        "kernels_per_forward": len(kernels) / iters,
        "kernel_time_ms": total / 1e3 / iters,
        "elementwise_kernels_per_forward": int((cls == "elementwise").sum()) / iters,
        "elementwise_time_pct": share(cls == "elementwise"),
        "copy_time_pct": share(cls == "copy_concat"),
        "matrix_time_pct": share(cls.isin(MATRIX)),
    }


def class_time(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per profiled config and kernel class: kernels, kernel time (us) and its share (%), from
    any kernel table with ``kernel_name`` and ``duration_us`` (an Nsight Compute or Kineto
    table), largest share first."""
    by = ("config",) if "config" in kernels else ()
    g = class_shares(kernels, by=by)
    g["time_pct"] = 100.0 * g.pop("time_share")
    g = g.drop(columns="launch_share")
    return g.sort_values([*by, "time_pct"], ascending=[True] * len(by) + [False]).reset_index(
        drop=True
    )


def ok(df: pd.DataFrame, technique: str) -> pd.DataFrame:
    """The rows of ``technique`` that ran (status ok)."""
    return df[(df.technique == technique) & (df.status == "ok")]


def _ratio(rows: pd.DataFrame, keys: list[str], base: str, column: str = "img_per_s"):
    """``column`` of every variant over its ``base`` variant's at the same ``keys``."""
    b = rows[rows.variant == base].set_index(keys)[column]
    idx = pd.MultiIndex.from_frame(rows[keys]) if len(keys) > 1 else rows[keys[0]]
    return rows[column].to_numpy() / b.reindex(idx).to_numpy()


def _order(s: pd.Series, order: dict) -> pd.Series:
    """Sort key of a table column: ``order`` for its own column, backends eager first."""
    if s.name == "backend":
        return s.map(BACKEND_ORDER)
    if s.name in ("variant", "scope"):
        return s.map(lambda v: order.get(v, len(order)))
    return s


def fusion_table(df: pd.DataFrame) -> pd.DataFrame:
    """Fusion rows: per backend, batch and variant the img/s, the speed-up over ``bn_unfused``,
    kernels per forward, the elementwise share of kernel time, the error vs fp32, and the
    BatchNorm / fused-conv module counts."""
    f = ok(df, "fusion").copy()
    if f.empty:
        return f
    f["speedup"] = _ratio(f, ["backend", "batch"], UNFUSED)
    order = {v: i for i, v in enumerate(FUSION_ORDER)}
    f = f.sort_values(["backend", "batch", "variant"], key=lambda s: _order(s, order))
    cols = [
        "backend",
        "batch",
        "variant",
        "img_per_s",
        "speedup",
        "median_ms",
        "kernels_per_forward",
        "elementwise_kernels_per_forward",
        "elementwise_time_pct",
        "matrix_time_pct",
        "rel_err",
        "bn_modules",
        "fused_conv_modules",
        "noisy",
    ]
    return f[[c for c in cols if c in f]].reset_index(drop=True)


def autocast_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per width, batch and backend: img/s of autocast and of the half model, their ratio, each
    one's error vs fp32 and kernels per forward (one row per unit, both variants side by side)."""
    a = ok(df, "autocast")
    if a.empty:
        return pd.DataFrame()
    keys = ["width", "batch", "backend"]
    cols = [c for c in ("img_per_s", "rel_err", "kernels_per_forward", "copy_time_pct") if c in a]
    wide = a.pivot_table(index=keys, columns="variant", values=cols, aggfunc="first")
    wide.columns = [f"{v}_{c}" for c, v in wide.columns]
    wide = wide.reset_index()
    if {"autocast_img_per_s", "half_model_img_per_s"} <= set(wide):
        wide["autocast_over_half"] = wide.autocast_img_per_s / wide.half_model_img_per_s
    return wide


def dtype_table(df: pd.DataFrame) -> pd.DataFrame:
    """The autocast dtype record: per width and module type its calls and how many returned
    fp32 (those first)."""
    d = ok(df, "autocast_dtypes")
    if d.empty:
        return d
    cols = ["width", "module_type", "calls", "fp32_output_calls", "upcast_calls"]
    return (
        d[cols]
        .sort_values(["width", "fp32_output_calls", "module_type"], ascending=[True, False, True])
        .reset_index(drop=True)
    )


def fp32_module_types(df: pd.DataFrame) -> pd.DataFrame:
    """Per width, the module types with at least one fp32 output under autocast."""
    d = dtype_table(df)
    return d[d.fp32_output_calls > 0] if len(d) else d


def buffer_table(df: pd.DataFrame) -> pd.DataFrame:
    """Batch-buffer rows: per scope (assembly alone, whole step), backend, batch and variant the
    img/s, ms per batch, the gain over ``stack_new`` (%), launches (assembly rows), and whether
    the batch lands in a static buffer or is copied into a CUDA graph's input."""
    b = ok(df, "batch_buffer").copy()
    if b.empty:
        return b
    b["gain_pct"] = 100.0 * (_ratio(b, ["scope", "backend", "batch"], "stack_new") - 1.0)
    cols = [
        "scope",
        "backend",
        "batch",
        "variant",
        "img_per_s",
        "median_ms",
        "gain_pct",
        "launches_per_forward",
        "static_buffer",
        "graph_input_copy",
        "noisy",
    ]
    order = {"assembly": 0, "step": 1, **{v: i for i, v in enumerate(("stack_new", *PREALLOC))}}
    b = b.sort_values(["scope", "backend", "batch", "variant"], key=lambda s: _order(s, order))
    return b[[c for c in cols if c in b]].reset_index(drop=True)


def failures(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that did not run or failed their check, and why."""
    bad = df[df.status != "ok"]
    cols = ["technique", "model", "variant", "backend", "scope", "batch", "status", "message"]
    return bad[[c for c in cols if c in bad]].reset_index(drop=True)


def scope(backend: str, batch: int | None = None) -> str:
    """The scope string of a per-backend (and per-batch) fact."""
    return f"backend={backend}" + (f",batch={int(batch)}" if batch is not None else "")


def _median(values) -> float:
    v = [x for x in values if x == x]
    return float(pd.Series(v).median()) if v else math.nan


def table_facts(df: pd.DataFrame) -> list[dict]:
    """The facts of one techniques table (see the module's docstring for the ratios)."""
    ds = (DATASET,)
    rows = []
    f = fusion_table(df)
    for (backend, batch), g in f.groupby(["backend", "batch"]) if len(f) else ():
        by = g.set_index("variant")
        sc = scope(backend, batch)

        def get(v, c, by=by):
            return float(by[c][v]) if v in by.index and c in by else math.nan

        rows += [
            fact("techniques.fusion_speedup", get(FUSED, "speedup"), "x", scope=sc, datasets=ds),
            fact("techniques.bn_fold_speedup", get(FOLDED, "speedup"), "x", scope=sc, datasets=ds),
            fact(
                "techniques.unfused_elementwise_pct",
                get(UNFUSED, "elementwise_time_pct"),
                "%",
                scope=sc,
                datasets=ds,
            ),
            fact(
                "techniques.fusion_elementwise_drop_pct",
                get(UNFUSED, "elementwise_time_pct") - get(FUSED, "elementwise_time_pct"),
                "%",
                scope=sc,
                datasets=ds,
            ),
            fact(
                "techniques.fusion_kernels_ratio",
                get(FUSED, "kernels_per_forward") / get(UNFUSED, "kernels_per_forward"),
                "x",
                scope=sc,
                datasets=ds,
            ),
        ]
    a = autocast_table(df)
    if len(a) and "autocast_over_half" in a:
        for backend, g in a.groupby("backend"):
            rows.append(
                fact(
                    "techniques.autocast_over_half_median",
                    _median(g.autocast_over_half),
                    "x",
                    scope=scope(backend),
                    datasets=ds,
                )
            )
        if {"autocast_rel_err", "half_model_rel_err"} <= set(a):
            err = a.autocast_rel_err / a.half_model_rel_err
            rows.append(
                fact("techniques.autocast_error_over_half_median", _median(err), "x", datasets=ds)
            )
    d = dtype_table(df)
    if len(d):
        per_width = d.groupby("width").apply(lambda g: int((g.fp32_output_calls > 0).sum()))
        rows.append(
            fact(
                "techniques.autocast_fp32_module_types",
                float(per_width.max()),
                "types",
                datasets=ds,
            )
        )
    b = buffer_table(df)
    for (sc_name, backend), g in b.groupby(["scope", "backend"]) if len(b) else ():
        best = g[g.variant.isin(PREALLOC)].groupby("batch").gain_pct.max()
        rows.append(
            fact(
                f"techniques.buffer_{sc_name}_gain_pct",
                _median(best),
                "%",
                scope=scope(backend),
                datasets=ds,
            )
        )
    return rows


def facts_table_of(df: pd.DataFrame) -> pd.DataFrame:
    """The facts table of one techniques table (the measured facts only)."""
    return facts_table(r for r in table_facts(df) if not math.isnan(r["value"]))


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    techniques.autocast_error_over_half_median techniques.autocast_fp32_module_types
    techniques.autocast_over_half_median techniques.bn_fold_speedup
    techniques.buffer_assembly_gain_pct techniques.buffer_step_gain_pct
    techniques.fusion_elementwise_drop_pct techniques.fusion_kernels_ratio
    techniques.fusion_speedup
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The techniques facts of ``root`` (empty where it holds no ``techniques`` table)."""
    return facts_table_of(root.load(DATASET)) if root.has(DATASET) else facts_table([])

"""Layer-by-layer occupancy heatmaps (notebook 04): layer x width / batch / precision tables of
time-weighted achieved and theoretical occupancy, time share and main limiter from Nsight Compute
per-kernel tables, a drill-down from one cell to its kernels, and Kineto's estimate against
ncu's measurement.

The *limiter* of a kernel here is what caps its occupancy: ``grid`` when the kernel launches
fewer blocks than one full wave (``waves_per_sm`` < 1: some SMs get fewer blocks than they could
hold, or none), else the block limit Nsight Compute reports as the smallest of ``limit_warps``,
``limit_blocks``, ``limit_registers`` and ``limit_shared_mem`` (ties named in
:data:`yolo_sm.analyse.occupancy.LIMITER_ORDER`; ``warps`` means the SM's warp slots are full, i.e.
no
per-kernel resource is the limit).
"""

from __future__ import annotations

import re

from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import LIMITER_ORDER
from yolo_sm.analyse.weighting import layer_view
from yolo_sm.contract.labels import parse_config, with_config

#: Order and colours of the limiter categories in the categorical heatmap.
LIMITERS = ("warps", "blocks", "registers", "shared_mem", "grid")
#: Precisions from widest to narrowest, the column order of precision heatmaps.
PRECISION_ORDER = ("fp32", "tf32", "fp16", "bf16")
_LIMIT_COLS = {name: f"limit_{name}" for name in LIMITER_ORDER}

KERNEL_COLUMNS = (
    "kernel_id",
    "kernel",
    "kernel_class",
    "duration_us",
    "grid_size",
    "block_size",
    "registers_per_thread",
    "shared_mem_per_block_bytes",
    "theoretical_occupancy_pct",
    "achieved_occupancy_pct",
    "block_limiter",
    "limiter",
    "waves_per_sm",
)


def add_config_columns(df):
    """A copy of ``df`` with family / width / precision / layout / batch parsed from ``config``
    and ``variant`` = ``"<precision> <layout>"``."""

    out = with_config(df, strict=True)
    out["variant"] = out.precision + " " + out.layout
    return out


def config_key(label: str) -> tuple:
    """Sort key of a config label: width, batch, precision, layout."""
    c = parse_config(label)
    return (c["width"], c["batch"], c["precision"], c["layout"])


def layer_key(name: str) -> tuple:
    """Natural sort key: ``model.2`` < ``model.10`` (plain string order puts 10 first)."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name)))


def layer_order(layers) -> list:
    """The distinct layer names in model order."""
    return sorted({str(x) for x in layers}, key=layer_key)


def short_kernel_name(name: str, max_len: int = 60) -> str:
    """A readable kernel name: no ``void``, template arguments or parameter list, at most
    ``max_len`` characters (``...`` marks a cut)."""
    s = re.sub(r"^void\s+|\(anonymous namespace\)::|<unnamed>::", "", str(name))
    s = re.split(r"[<(]", s, maxsplit=1)[0].strip()
    return s if len(s) <= max_len else s[: max_len - 3] + "..."


def add_limiter(kernels):
    """A copy of ``kernels`` (Nsight Compute rows) with ``block_limiter`` (the smallest of the
    four block limits) and ``limiter`` (``grid`` when under one wave, else ``block_limiter``)."""
    import numpy as np

    out = kernels.copy()
    names = np.array(LIMITER_ORDER)
    lim = out[[_LIMIT_COLS[n] for n in LIMITER_ORDER]].to_numpy(dtype=float)
    out["block_limiter"] = names[np.argmin(lim, axis=1)]  # argmin: first of ties, in order
    out["limiter"] = np.where(out.waves_per_sm < 1, "grid", out.block_limiter)
    return out


def layer_table(kernels):
    """One row per (config, layer): :func:`yolo_sm.analyse.weighting.layer_view` (kernels, time,
    time-weighted theoretical / achieved occupancy, SM coverage, main limiter by time and
    ``main_limiter_share``, the share of the layer's kernel time under that limiter; its
    ``time_share`` is within each config), the parsed config columns, ``layer_idx`` (model
    order) and ``layer_label``."""

    df = add_limiter(kernels)
    out = layer_view(df, by=("config", "layer", "module_type", "stage"))
    by_lim = df.groupby(["config", "layer", "limiter"], observed=True).duration_us.sum()
    lim_share = (by_lim / by_lim.groupby(level=[0, 1]).transform("sum")).rename("s").reset_index()
    lim_share = lim_share.rename(columns={"limiter": "main_limiter", "s": "main_limiter_share"})
    out = out.merge(lim_share, on=["config", "layer", "main_limiter"], how="left")
    out = add_config_columns(out)
    order = {name: i for i, name in enumerate(layer_order(out.layer))}
    out["layer_idx"] = out.layer.map(order)
    out["layer_label"] = out.layer + " " + out.module_type
    return out.sort_values(["width", "batch", "variant", "layer_idx"]).reset_index(drop=True)


def limiter_shares(kernels, by="config"):
    """Share of each ``by`` group's kernel time under each limiter (:func:`add_limiter`), one
    column per limiter in :data:`LIMITERS` order, with the parsed config columns when ``by`` is
    ``"config"``."""
    df = add_limiter(kernels)
    t = df.pivot_table(index=by, columns="limiter", values="duration_us", aggfunc="sum")
    t = t.reindex(columns=[c for c in LIMITERS if c in t.columns]).fillna(0.0)
    t = t.div(t.sum(axis=1), axis=0).reset_index()
    t.columns.name = None
    if by == "config":
        t = add_config_columns(t).sort_values(["width", "batch", "variant"])
    return t.reset_index(drop=True)


def config_summary(table, *, by="width", threshold=50.0, high=85.0):
    """Per value of ``by``: forward kernel time, time-weighted achieved / theoretical occupancy
    over the whole forward, layers (and their time share) below ``threshold`` % achieved
    occupancy, layers at or above ``high`` %, and the slowest layer with its share and
    occupancy."""
    import pandas as pd

    rows = []
    for key, g in table.groupby(by, sort=True):
        w = g.time_us / g.time_us.sum()
        low = g.achieved_occupancy_tw_pct < threshold
        top = g.loc[g.time_us.idxmax()]
        rows.append(
            {
                by: key,
                "layers": len(g),
                "kernels": int(g.kernels.sum()),
                "forward_kernel_ms": g.time_us.sum() / 1e3,
                "achieved_occupancy_tw_pct": (g.achieved_occupancy_tw_pct * w).sum(),
                "theoretical_occupancy_tw_pct": (g.theoretical_occupancy_tw_pct * w).sum(),
                f"layers_below_{threshold:g}": int(low.sum()),
                f"time_share_below_{threshold:g}": w[low].sum(),
                f"layers_at_least_{high:g}": int((g.achieved_occupancy_tw_pct >= high).sum()),
                "slowest_layer": top.layer_label,
                "slowest_share": top.time_share,
                "slowest_achieved_pct": top.achieved_occupancy_tw_pct,
            }
        )
    return pd.DataFrame(rows)


def kernels_of(kernels, config: str, layer: str):
    """The kernels of one heatmap cell in launch order: short name (with the operation in
    brackets where the name says it, e.g. ``[silu]``), class, duration, grid,
    block, registers, shared memory, theoretical and achieved occupancy, limiters, waves."""

    sel = kernels[(kernels.config == config) & (kernels.layer == layer)]
    if sel.empty:
        raise ValueError(f"no kernels for config {config!r}, layer {layer!r}")
    sel = add_limiter(add_kernel_class(sel))
    short = sel.kernel_name.map(short_kernel_name)
    sel = sel.assign(kernel=short.where(sel.op == "", short + " [" + sel.op + "]"))
    return sel.sort_values("kernel_id")[list(KERNEL_COLUMNS)].reset_index(drop=True)


def slowest_layer(table, config: str) -> str:
    """The layer of ``config`` with the most kernel time."""
    g = table[table.config == config]
    return str(g.loc[g.time_us.idxmax(), "layer"])


def estimate_vs_measured(profile):
    """Kineto's estimate against ncu per layer (from ``h200/profile_layers``): width parsed,
    ``est_minus_achieved`` and ``est_minus_theoretical`` in percentage points, and
    ``time_share`` within each config (ncu time)."""
    out = add_config_columns(profile)
    out["est_minus_achieved"] = out.est_occupancy_tw_pct - out.ncu_achieved_occupancy_tw_pct
    out["est_minus_theoretical"] = out.est_occupancy_tw_pct - out.ncu_theoretical_occupancy_tw_pct
    out["time_share"] = out.ncu_time_us / out.groupby("config").ncu_time_us.transform("sum")
    out["layer_idx"] = out.layer.map(layer_key)
    return out.sort_values(["width", "layer_idx"]).drop(columns="layer_idx").reset_index(drop=True)

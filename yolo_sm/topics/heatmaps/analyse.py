"""Occupancy heatmaps (notebook 04): per-layer occupancy, time share and limiter tables from
Nsight Compute, Kineto's estimate against ncu, and each layer's stall reasons. A kernel's limiter
is ``grid`` under one full wave, else its block limiter (as in notebook 00)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import RESOURCES, block_limiter
from yolo_sm.analyse.weighting import layer_view
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config, with_config

WIDTH_NCU = "ncu_width_b8"
BATCH_NCU = "ncu_batch_w1"
PRECISION_NCU = "ncu_precision_w1"
PROFILE = "profile_layers"
#: achieved occupancy (%) under which a layer is low, at or above which high
LOW_PCT = 50.0
HIGH_PCT = 85.0
#: points within which Kineto's per-layer estimate matches ncu
KINETO_TOLERANCE = 10.0

LIMITERS = ("warps", "blocks", "registers", "shared_mem", "grid")
PRECISION_ORDER = ("fp32", "tf32", "fp16", "bf16")

KERNEL_COLUMNS = (
    "kernel_id", "kernel", "kernel_class", "duration_us", "grid_size", "block_size",
    "registers_per_thread", "shared_mem_per_block_bytes", "theoretical_occupancy_pct",
    "achieved_occupancy_pct", "block_limiter", "limiter", "waves_per_sm")  # fmt: skip


def add_config_columns(df):
    """A copy of ``df`` with the parsed config columns and ``variant`` (precision layout)."""
    out = with_config(df, strict=True)
    out["variant"] = out.precision + " " + out.layout
    return out


def config_key(label: str) -> tuple:
    """Sort key of a config label: width, batch, precision, layout."""
    c = parse_config(label)
    return (c["width"], c["batch"], c["precision"], c["layout"])


def layer_key(name: str) -> tuple:
    """Natural sort key: ``model.2`` < ``model.10``."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name)))


def layer_order(layers) -> list:
    """The distinct layer names in model order."""
    return sorted({str(x) for x in layers}, key=layer_key)


def short_kernel_name(name: str, max_len: int = 60) -> str:
    """A kernel name without ``void``, templates or parameters, at most ``max_len`` chars."""
    s = re.sub(r"^void\s+|\(anonymous namespace\)::|<unnamed>::", "", str(name))
    s = re.split(r"[<(]", s, maxsplit=1)[0].strip()
    return s if len(s) <= max_len else s[: max_len - 3] + "..."


def add_limiter(kernels):
    """``kernels`` with ``block_limiter`` and ``limiter`` (``grid`` under one wave)."""
    lim = block_limiter(kernels)
    return kernels.assign(block_limiter=lim, limiter=lim.where(kernels.waves_per_sm >= 1, "grid"))


def layer_table(kernels):
    """Per (config, layer): :func:`~yolo_sm.analyse.weighting.layer_view`, ``main_limiter_share``
    of the layer's time, the config columns, ``layer_idx`` (model order) and ``layer_label``."""
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
    """Share of each ``by`` group's kernel time under each limiter, one column per limiter."""
    df = add_limiter(kernels)
    t = df.pivot_table(index=by, columns="limiter", values="duration_us", aggfunc="sum")
    t = t.reindex(columns=[c for c in LIMITERS if c in t.columns]).fillna(0.0)
    t = t.div(t.sum(axis=1), axis=0).reset_index()
    t.columns.name = None
    if by == "config":
        t = add_config_columns(t).sort_values(["width", "batch", "variant"])
    return t.reset_index(drop=True)


# fmt: off
def config_summary(table, *, by="width", threshold=LOW_PCT, high=HIGH_PCT):
    """Per ``by``: forward kernel ms, time-weighted occupancy (%), layers below ``threshold`` %
    and at or above ``high`` % achieved, and the slowest layer."""
    rows = []
    for key, g in table.groupby(by, sort=True):
        w, ach = g.time_us / g.time_us.sum(), g.achieved_occupancy_tw_pct
        low, top = ach < threshold, g.loc[g.time_us.idxmax()]
        rows.append({
            by: key, "layers": len(g), "kernels": int(g.kernels.sum()),
            "forward_kernel_ms": g.time_us.sum() / 1e3,
            "achieved_occupancy_tw_pct": (ach * w).sum(),
            "theoretical_occupancy_tw_pct": (g.theoretical_occupancy_tw_pct * w).sum(),
            f"layers_below_{threshold:g}": int(low.sum()),
            f"time_share_below_{threshold:g}": w[low].sum(),
            f"layers_at_least_{high:g}": int((ach >= high).sum()), "slowest_layer": top.layer_label,
            "slowest_share": top.time_share, "slowest_achieved_pct": top.achieved_occupancy_tw_pct,
        })
    return pd.DataFrame(rows)
# fmt: on


def kernels_of(kernels, config: str, layer: str):
    """The kernels of one heatmap cell in launch order, :data:`KERNEL_COLUMNS`."""
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
    """Kineto's estimate against ncu per layer: differences in points, ``time_share`` (ncu)."""
    out = add_config_columns(profile)
    out["est_minus_achieved"] = out.est_occupancy_tw_pct - out.ncu_achieved_occupancy_tw_pct
    out["est_minus_theoretical"] = out.est_occupancy_tw_pct - out.ncu_theoretical_occupancy_tw_pct
    out["time_share"] = out.ncu_time_us / out.groupby("config").ncu_time_us.transform("sum")
    out["layer_idx"] = out.layer.map(layer_key)
    return out.sort_values(["width", "layer_idx"]).drop(columns="layer_idx").reset_index(drop=True)


def _width_facts(kernels) -> list[dict]:
    table = layer_table(kernels)
    s = config_summary(table, by="width").set_index("width")
    ach, ds = s.achieved_occupancy_tw_pct, (WIDTH_NCU,)
    low = 100 * s[f"layers_below_{LOW_PCT:g}"] / s.layers
    k = add_config_columns(add_limiter(add_kernel_class(kernels)))
    k = k[k.kernel_class.str.startswith("tensor_core")]  # % of its time capped by regs or smem
    capped = k.duration_us.where(k.block_limiter.isin(RESOURCES), 0.0)
    res = 100 * capped.groupby(k.width).sum() / k.groupby("width").duration_us.sum()
    widest = table[table.width == table.width.max()]
    slow = widest.loc[widest.time_us.idxmax()]

    def lowest(v):
        return v.min() if len(v) else math.nan

    at15 = ach[np.isclose(ach.index, 1.5)]
    return [
        *(fact("achieved_occupancy_tw_pct", v, "%", scope=f"width={w:g}", datasets=ds)
          for w, v in ach.items()),
        fact("tc_resource_capped_time_share_min_over_widths", lowest(res), "%", datasets=ds,
             note=f"lowest at width {res.idxmin():g}" if len(res) else ""),
        fact("slowest_layer_achieved_occupancy_tw_pct_widest", slow.achieved_occupancy_tw_pct,
             "%", datasets=ds, note=f"{slow.layer_label} at width {slow.width:g}"),
        fact("achieved_occupancy_tw_pct_min", lowest(ach[ach.index <= 1.25]), "%",
             scope="width<=1.25", datasets=ds),
        fact("achieved_occupancy_tw_pct_distance_from_60",
             abs(at15.iloc[0] - 60.0) if len(at15) else math.nan, "points", scope="width=1.5",
             datasets=ds),
        fact(f"layers_below_{LOW_PCT:g}_share_min", lowest(low[low.index > 1.7]), "%",
             scope="width>1.7", datasets=ds),
    ]  # fmt: skip


#: the facts a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    achieved_occupancy_tw_pct_distance_from_60 achieved_occupancy_tw_pct_min
    fastest_variant_occupancy_below_highest_pct_points grid_limited_time_share_smallest_batch
    kineto_layers_within_10_share layers_below_50_share_min
    tc_resource_capped_time_share_min_over_widths
    slowest_layer_achieved_occupancy_tw_pct_widest
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The heatmaps' facts; notebook 09's width claims read those scoped by width."""
    rows = _width_facts(root.load(WIDTH_NCU)) if root.has(WIDTH_NCU) else []
    if root.has(BATCH_NCU):
        k = add_config_columns(add_limiter(root.load(BATCH_NCU)))
        k = k[k.batch == k.batch.min()]
        grid = 100 * k.duration_us[k.limiter == "grid"].sum() / k.duration_us.sum()
        note, ds = f"batch {k.batch.iloc[0]}", (BATCH_NCU,)
        rows.append(
            fact("grid_limited_time_share_smallest_batch", grid, "%", datasets=ds, note=note)
        )
    if root.has(PRECISION_NCU):
        s = config_summary(layer_table(root.load(PRECISION_NCU)), by="variant")
        best = s.loc[s.achieved_occupancy_tw_pct.idxmax()]
        fast = s.loc[s.forward_kernel_ms.idxmin()]
        gap = best.achieved_occupancy_tw_pct - fast.achieved_occupancy_tw_pct
        note = f"highest occupancy: {best.variant}; fastest: {fast.variant}"
        key = "fastest_variant_occupancy_below_highest_pct_points"
        rows.append(fact(key, gap, "points", datasets=(PRECISION_NCU,), note=note))
    if root.has(PROFILE):
        err = estimate_vs_measured(root.load(PROFILE)).est_minus_achieved.abs()
        share = 100 * (err <= KINETO_TOLERANCE).mean()
        key = f"kineto_layers_within_{KINETO_TOLERANCE:g}_share"
        rows.append(fact(key, share, "%", datasets=(PROFILE,), note="profiled layers"))
    return facts_table(rows)


OUTLIER_COLUMNS = [
    "config", "layer", "module_type", "time_share", "est_occupancy_tw_pct",
    "ncu_achieved_occupancy_tw_pct", "ncu_theoretical_occupancy_tw_pct", "est_minus_achieved",
    "kernels_match"]  # fmt: skip


def kineto_outliers(est, tolerance: float = KINETO_TOLERANCE):
    """Layers where Kineto is more than ``tolerance`` points off ncu, most underestimated first."""
    out = est.loc[est.est_minus_achieved.abs() > tolerance]
    cols = [c for c in OUTLIER_COLUMNS if c in out]
    return out[cols].sort_values("est_minus_achieved").reset_index(drop=True)


#: ``stall_<reason>_cycles``: cycles stalled on the reason per issued instruction (ncu stalls set)
STALLS = "ncu_stalls_w1"
STALL = re.compile(r"stall_(?P<reason>\w+?)_cycles")
DETAIL = (
    "warp_execution_efficiency_pct", "l1_hit_rate_pct", "l2_hit_rate_pct", "local_load_sectors",
    "local_store_sectors", "issue_active_pct", "achieved_occupancy_pct")  # fmt: skip


def stall_columns(ncu: pd.DataFrame) -> list[str]:
    return [c for c in ncu.columns if STALL.fullmatch(c)]


def top_kernels(ncu: pd.DataFrame, per_layer: int = 1) -> pd.DataFrame:
    """Per (config, layer): its ``per_layer`` longest kernels, stall cycles, ``top_stall`` and
    its share, and the memory / efficiency columns, in layer order."""
    stalls = stall_columns(ncu)
    k = ncu[ncu.layer.fillna("") != ""].copy()
    if k.empty or not stalls:
        return pd.DataFrame()
    k["stall_cycles"] = k[stalls].sum(axis=1, min_count=1)
    k["top_stall"] = k[stalls].idxmax(axis=1, skipna=True).str.extract(STALL.pattern)["reason"]
    k["top_stall_share"] = k[stalls].max(axis=1) / k.stall_cycles
    k = k.sort_values("duration_us", ascending=False)
    top = k.groupby(["config", "layer"], sort=False).head(per_layer).copy()
    top["kernel"] = top.kernel_name.map(short_kernel_name)
    top["layer_index"] = pd.to_numeric(top.layer.str.extract(r"(\d+)$")[0], errors="coerce")
    top = top.sort_values(["config", "layer_index", "duration_us"], ascending=[True, True, False])
    keep = ["config", "layer", "module_type", "kernel", "duration_us", "stall_cycles", "top_stall"]
    keep += ["top_stall_share", *[c for c in DETAIL if c in top], *stalls]
    return top[keep].reset_index(drop=True)


def stalls_long(top: pd.DataFrame) -> pd.DataFrame:
    """:func:`top_kernels` per (kernel, reason): ``cycles`` and ``share``; reasons under 1 % of
    every kernel's stall cycles fold into ``other``."""
    stalls = stall_columns(top)
    if top.empty or not stalls:
        return pd.DataFrame(columns=["config", "layer", "kernel", "reason", "cycles", "share"])
    t = top.assign(label=top.layer + " " + top.module_type.fillna(""))
    ids = ["config", "layer", "label", "kernel", "stall_cycles"]
    long = t.melt(id_vars=ids, value_vars=stalls, var_name="reason", value_name="cycles")
    long["reason"] = long.reason.str.extract(STALL.pattern)["reason"]
    long["share"] = long.cycles / long.stall_cycles
    small = long.groupby("reason").share.max() < 0.01
    long.loc[long.reason.map(small).fillna(True).astype(bool), "reason"] = "other"
    by = [*ids[:-1], "reason"]
    return long.groupby(by, as_index=False, sort=False)[["cycles", "share"]].sum()


def spill_kernels(ncu: pd.DataFrame) -> pd.DataFrame:
    """Kernels with local-memory sectors (register spills, local arrays), longest first."""
    cols = [c for c in ("local_load_sectors", "local_store_sectors") if c in ncu]
    if not cols:
        return pd.DataFrame()
    hit = ncu[ncu[cols].fillna(0).sum(axis=1) > 0]
    out = hit.assign(kernel=hit.kernel_name.map(short_kernel_name))
    keep = ["config", "layer", "kernel", "duration_us", *cols, "registers_per_thread"]
    return out[[c for c in keep if c in out]].sort_values("duration_us", ascending=False)

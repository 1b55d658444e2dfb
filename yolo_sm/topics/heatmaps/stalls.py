"""Why warps wait: the Nsight Compute ``stalls`` metric set per kernel (an ncu table with
``stall_<reason>_cycles`` columns), as the top kernels of each layer and their stall reasons.

``stall_<reason>_cycles`` is the average number of warps stalled on the reason per issued
instruction; summed over the reasons it is the cycles a warp waits between two of its
instructions, so each reason's share says what the kernel waited on.
"""

from __future__ import annotations

import re

import pandas as pd

STALL = re.compile(r"stall_(?P<reason>\w+?)_cycles")
DETAIL = (
    "warp_execution_efficiency_pct",
    "l1_hit_rate_pct",
    "l2_hit_rate_pct",
    "local_load_sectors",
    "local_store_sectors",
    "issue_active_pct",
    "achieved_occupancy_pct",
)


def stall_columns(ncu: pd.DataFrame) -> list[str]:
    return [c for c in ncu.columns if STALL.fullmatch(c)]


def short_name(name: str, width: int = 60) -> str:
    """A kernel name cut to its head (template arguments dropped), at most ``width`` chars."""
    head = re.sub(r"^void\s+", "", str(name)).split("(")[0]
    head = re.sub(r"<.*", "", head) if len(head) > width else head
    return head if len(head) <= width else head[: width - 1] + "…"


def top_kernels(ncu: pd.DataFrame, per_layer: int = 1) -> pd.DataFrame:
    """Per (config, layer): its ``per_layer`` longest kernels with their stall reasons, the
    largest reason (``top_stall``) and its share of all stall cycles (``top_stall_share``), the
    stall cycles summed (``stall_cycles``) and the memory / efficiency columns of the set,
    sorted in layer order. Kernels outside any layer are left out."""
    stalls = stall_columns(ncu)
    k = ncu[ncu.layer.fillna("") != ""].copy()
    if k.empty or not stalls:
        return pd.DataFrame()
    k["stall_cycles"] = k[stalls].sum(axis=1, min_count=1)
    reasons = (
        k[stalls].idxmax(axis=1, skipna=True).str.replace("stall_", "").str.replace("_cycles", "")
    )
    k["top_stall"] = reasons
    k["top_stall_share"] = k[stalls].max(axis=1) / k.stall_cycles
    k = k.sort_values("duration_us", ascending=False)
    top = k.groupby(["config", "layer"], sort=False).head(per_layer).copy()
    top["kernel"] = top.kernel_name.map(short_name)
    top["layer_index"] = pd.to_numeric(top.layer.str.extract(r"(\d+)$")[0], errors="coerce")
    top = top.sort_values(["config", "layer_index", "duration_us"], ascending=[True, True, False])
    keep = ["config", "layer", "module_type", "kernel", "duration_us", "stall_cycles", "top_stall"]
    keep += ["top_stall_share", *[c for c in DETAIL if c in top], *stalls]
    return top[keep].reset_index(drop=True)


def stalls_long(top: pd.DataFrame) -> pd.DataFrame:
    """:func:`top_kernels` as one row per (layer kernel, reason): ``cycles`` and ``share`` of
    the kernel's stall cycles; reasons under 1 % of every kernel's stall cycles are folded into
    ``other``."""
    stalls = stall_columns(top)
    if top.empty or not stalls:
        return pd.DataFrame(columns=["config", "layer", "kernel", "reason", "cycles", "share"])
    t = top.assign(label=top.layer + " " + top.module_type.fillna(""))
    long = t.melt(
        id_vars=["config", "layer", "label", "kernel", "stall_cycles"],
        value_vars=stalls,
        var_name="reason",
        value_name="cycles",
    )
    long["reason"] = long.reason.str.extract(STALL.pattern)["reason"]
    long["share"] = long.cycles / long.stall_cycles
    small = long.groupby("reason").share.max() < 0.01
    long.loc[long.reason.map(small).fillna(True).astype(bool), "reason"] = "other"
    long = long.groupby(
        ["config", "layer", "label", "kernel", "reason"], as_index=False, sort=False
    )[["cycles", "share"]].sum()
    return long


def spill_kernels(ncu: pd.DataFrame) -> pd.DataFrame:
    """Kernels that touch local memory (register spills or local arrays): local load / store
    sectors above zero, longest first."""
    cols = [c for c in ("local_load_sectors", "local_store_sectors") if c in ncu]
    if not cols:
        return pd.DataFrame()
    hit = ncu[ncu[cols].fillna(0).sum(axis=1) > 0]
    out = hit.assign(kernel=hit.kernel_name.map(short_name))
    keep = ["config", "layer", "kernel", "duration_us", *cols, "registers_per_thread"]
    return out[[c for c in keep if c in out]].sort_values("duration_us", ascending=False)

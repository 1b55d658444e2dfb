"""Layer-by-layer occupancy heatmaps (notebook 04): layer x width / batch / precision tables of
time-weighted achieved and theoretical occupancy, time share and main limiter from Nsight Compute
per-kernel tables, a drill-down from one cell to its kernels, and Kineto's estimate against
ncu's measurement.

The *limiter* of a kernel here is what caps its occupancy: ``grid`` when the kernel launches
fewer blocks than one full wave (``waves_per_sm`` < 1: some SMs get fewer blocks than they could
hold, or none), else the block limit Nsight Compute reports as the smallest of ``limit_warps``,
``limit_blocks``, ``limit_registers`` and ``limit_shared_mem`` (ties named in
:data:`yolo_sm.analyse.occupancy.LIMITER_ORDER`; ``warps`` means the SM's warp slots are full, i.e.
no per-kernel resource is the limit).

:func:`facts` reads a dataset root and returns the numbers the heatmaps' rules
(:mod:`yolo_sm.topics.heatmaps.rules`) and the width claim judge; a dataset the root lacks
leaves its facts out.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import LIMITER_ORDER
from yolo_sm.analyse.weighting import layer_view
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config, with_config

#: The notebook's datasets: Nsight Compute per kernel over widths, batches and precisions, and
#: the per-layer join of Kineto's estimate with Nsight Compute.
WIDTH_NCU = "ncu_width_b8"
BATCH_NCU = "ncu_batch_w1"
PRECISION_NCU = "ncu_precision_w1"
PROFILE = "profile_layers"
#: Achieved occupancy (%) under which a layer counts as low, and at or above which as high.
LOW_PCT = 50.0
HIGH_PCT = 85.0
#: Percentage points within which Kineto's per-layer estimate counts as matching ncu.
KINETO_TOLERANCE = 10.0

#: The limiter categories, in the order of the categorical heatmap (colours:
#: yolo_sm.report.colors.LIMITER_COLORS).
LIMITERS = ("warps", "blocks", "registers", "shared_mem", "grid")
#: the block limits a kernel's own resources set
RESOURCES = ("registers", "shared_mem")
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


def config_summary(table, *, by="width", threshold=LOW_PCT, high=HIGH_PCT):
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
    """Kineto's estimate against ncu per layer (from ``profile_layers``): width parsed,
    ``est_minus_achieved`` and ``est_minus_theoretical`` in percentage points, and
    ``time_share`` within each config (ncu time)."""
    out = add_config_columns(profile)
    out["est_minus_achieved"] = out.est_occupancy_tw_pct - out.ncu_achieved_occupancy_tw_pct
    out["est_minus_theoretical"] = out.est_occupancy_tw_pct - out.ncu_theoretical_occupancy_tw_pct
    out["time_share"] = out.ncu_time_us / out.groupby("config").ncu_time_us.transform("sum")
    out["layer_idx"] = out.layer.map(layer_key)
    return out.sort_values(["width", "layer_idx"]).drop(columns="layer_idx").reset_index(drop=True)


# ---- facts ----------------------------------------------------------------------------------


def _scope(by: str, v) -> str:
    return f"{by}={v:g}" if isinstance(v, (int, float, np.integer, np.floating)) else f"{by}={v}"


def _summary(kernels, by: str):
    """Per value of ``by``: the summary (:func:`config_summary`), the layer table, and the
    shares (%) of kernel time under one wave (``grid``) and whose smallest block limit is a
    per-kernel resource (registers or shared memory, whatever the grid: :data:`RESOURCES`)."""
    table = layer_table(kernels)
    s = config_summary(table, by=by)
    lim = limiter_shares(kernels).groupby(by).first()
    grid = 100 * (lim["grid"] if "grid" in lim else 0.0 * lim.sum(axis=1))
    # what caps residency per SM, whatever the grid: a persistent convolution sizes its grid
    # to the blocks its registers and shared memory allow, so its grid is not its limit
    blk = add_config_columns(add_limiter(kernels))
    blk = blk.assign(res=blk.duration_us.where(blk.block_limiter.isin(RESOURCES), 0.0))
    resource = 100 * blk.groupby(by).res.sum() / blk.groupby(by).duration_us.sum()
    return s, table, grid, resource


def _width_facts(kernels) -> list[dict]:
    s, table, _, resource = _summary(kernels, "width")
    ds = (WIDTH_NCU,)
    ach = s.set_index("width").achieved_occupancy_tw_pct
    low = (s[f"layers_below_{LOW_PCT:g}"] / s.layers * 100).set_axis(s.width)
    # per width: what the width claims (notebook 09) derive from
    rows = [fact("achieved_occupancy_tw_pct", v, "%", scope=_scope("width", w), datasets=ds)
            for w, v in ach.items()]  # fmt: skip
    widest = table[table.width == table.width.max()]
    slowest = widest.loc[widest.time_us.idxmax()]

    def pick(series, mask):
        return series[mask] if mask.any() else series.iloc[:0]

    small = pick(ach, ach.index <= 1.25)
    at15 = pick(ach, np.isclose(ach.index, 1.5))
    big = pick(low, low.index > 1.7)
    rows += [
        fact(
            "resource_limited_time_share_max_over_widths",
            resource.max() if len(resource) else math.nan,
            "%",
            datasets=ds,
        ),
        fact(
            "slowest_layer_achieved_occupancy_tw_pct_widest",
            slowest.achieved_occupancy_tw_pct,
            "%",
            datasets=ds,
            note=f"{slowest.layer_label} at width {slowest.width:g}",
        ),
        # the width claim's three parts (facts only; the claim's rules judge them)
        fact(
            "achieved_occupancy_tw_pct_min",
            small.min() if len(small) else math.nan,
            "%",
            scope="width<=1.25",
            datasets=ds,
        ),
        fact(
            "achieved_occupancy_tw_pct_distance_from_60",
            abs(at15.iloc[0] - 60.0) if len(at15) else math.nan,
            "points",
            scope="width=1.5",
            datasets=ds,
        ),
        fact(
            f"layers_below_{LOW_PCT:g}_share_min",
            big.min() if len(big) else math.nan,
            "%",
            scope="width>1.7",
            datasets=ds,
        ),
    ]
    return rows


def _batch_facts(kernels) -> list[dict]:
    s, _, grid, _ = _summary(kernels, "batch")
    first = s.sort_values("batch").iloc[0]
    return [
        fact(
            "grid_limited_time_share_smallest_batch",
            grid.loc[first.batch],
            "%",
            datasets=(BATCH_NCU,),
            note=f"batch {first.batch}",
        ),
    ]


def _precision_facts(kernels) -> list[dict]:
    s = config_summary(layer_table(kernels), by="variant")
    best = s.loc[s.achieved_occupancy_tw_pct.idxmax()]
    fast = s.loc[s.forward_kernel_ms.idxmin()]
    return [
        fact(
            "fastest_variant_occupancy_below_highest_pct_points",
            best.achieved_occupancy_tw_pct - fast.achieved_occupancy_tw_pct,
            "points",
            datasets=(PRECISION_NCU,),
            note=f"highest occupancy: {best.variant}; fastest forward: {fast.variant}",
        )
    ]


def _kineto_facts(profile) -> list[dict]:
    est = estimate_vs_measured(profile)
    err = est.est_minus_achieved.abs()
    return [
        fact(
            f"kineto_layers_within_{KINETO_TOLERANCE:g}_share",
            100 * (err <= KINETO_TOLERANCE).mean(),
            "%",
            datasets=(PROFILE,),
            note="layer rows where Kineto's estimate is within the tolerance of ncu's achieved",
        ),
    ]


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    achieved_occupancy_tw_pct_distance_from_60 achieved_occupancy_tw_pct_min
    fastest_variant_occupancy_below_highest_pct_points grid_limited_time_share_smallest_batch
    kineto_layers_within_10_share layers_below_50_share_min
    resource_limited_time_share_max_over_widths slowest_layer_achieved_occupancy_tw_pct_widest
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The heatmaps' facts from ``root`` (:mod:`yolo_sm.analyse.facts`).

    Per width (scope ``width=<w>``): ``achieved_occupancy_tw_pct`` (the forward's,
    time-weighted; claim 2 derives from it). Whole-notebook facts (scope empty):
    ``resource_limited_time_share_max_over_widths``,
    ``slowest_layer_achieved_occupancy_tw_pct_widest``,
    ``grid_limited_time_share_smallest_batch``,
    ``fastest_variant_occupancy_below_highest_pct_points``, ``kineto_layers_within_10_share``.
    For the width claim: ``achieved_occupancy_tw_pct_min`` (scope ``width<=1.25``),
    ``achieved_occupancy_tw_pct_distance_from_60`` (``width=1.5``) and
    ``layers_below_50_share_min`` (``width>1.7``), NaN when the root has no such width.
    """
    rows = []
    if root.has(WIDTH_NCU):
        rows += _width_facts(root.load(WIDTH_NCU))
    if root.has(BATCH_NCU):
        rows += _batch_facts(root.load(BATCH_NCU))
    if root.has(PRECISION_NCU):
        rows += _precision_facts(root.load(PRECISION_NCU))
    if root.has(PROFILE):
        rows += _kineto_facts(root.load(PROFILE))
    return facts_table(rows)


OUTLIER_COLUMNS = [
    "config",
    "layer",
    "module_type",
    "time_share",
    "est_occupancy_tw_pct",
    "ncu_achieved_occupancy_tw_pct",
    "ncu_theoretical_occupancy_tw_pct",
    "est_minus_achieved",
    "kernels_match",
]


def kineto_outliers(est, tolerance: float = KINETO_TOLERANCE):
    """The layer rows of :func:`estimate_vs_measured` where Kineto's estimate is more than
    ``tolerance`` points from ncu's achieved occupancy, most underestimated first."""
    out = est.loc[est.est_minus_achieved.abs() > tolerance]
    cols = [c for c in OUTLIER_COLUMNS if c in out]
    return out[cols].sort_values("est_minus_achieved").reset_index(drop=True)

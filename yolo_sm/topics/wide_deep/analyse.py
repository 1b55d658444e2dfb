"""Wide against deep at equal FLOPs: the ``wide_vs_deep`` table's pairs side by side, and the
facts (keys ``wide_deep.*``) comparing the two models of a pair timed in one process."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import clock_spread_pct, fact, facts_table, sm_clock_mhz

DATASET = "wide_vs_deep"


def pair_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (pair, backend, batch), both models side by side (``*_wide`` /
    ``*_deep``), ``wide_over_deep`` (img/s), ``flops_diff_pct``, ``occupancy_diff_pct`` (points)."""
    ok = df[df.status == "ok"].assign(clock_mhz=sm_clock_mhz)
    cols = ["width", "depth", "flops_per_img", "img_per_s", "kernels_per_forward", "clock_mhz"]
    cols += [c for c in ("est_occupancy_tw_pct",) if c in ok]
    idx = ["pair", "backend", "batch"]
    wide = ok[ok.role == "wide"].set_index(idx)[cols]
    deep = ok[ok.role == "deep"].set_index(idx)[cols]
    t = wide.merge(deep, left_index=True, right_index=True, suffixes=("_wide", "_deep"))
    t = t.reset_index()
    t["wide_over_deep"] = t.img_per_s_wide / t.img_per_s_deep
    t["flops_diff_pct"] = 100 * (t.flops_per_img_deep / t.flops_per_img_wide - 1)
    if "est_occupancy_tw_pct_wide" in t:
        t["occupancy_diff_pct"] = t.est_occupancy_tw_pct_wide - t.est_occupancy_tw_pct_deep
    return t.sort_values(idx, ignore_index=True)


def facts(root) -> pd.DataFrame:
    """Per backend and batch: least and median wide-over-deep ratio, median occupancy
    difference (points), with the widest clock spread."""
    if not root.has(DATASET):
        return facts_table([])
    t, ds, rows = pair_table(root.load(DATASET)), (DATASET,), []
    for (back, b), g in t.groupby(["backend", "batch"]):
        sc = f"backend={back}, batch={b}"
        spread = max(map(clock_spread_pct, g.clock_mhz_wide, g.clock_mhz_deep))
        kw = {"scope": sc, "datasets": ds, "clock_spread_pct": spread}
        rows.append(fact("wide_deep.wide_over_deep_min", g.wide_over_deep.min(), "x", **kw))
        rows.append(fact("wide_deep.wide_over_deep_median", g.wide_over_deep.median(), "x", **kw))
        if "occupancy_diff_pct" in g:
            occ = g.occupancy_diff_pct.median()
            rows.append(fact("wide_deep.occupancy_wide_minus_deep_pct", occ, "points",
                             scope=sc, datasets=ds))  # fmt: skip
    return facts_table(r for r in rows if not math.isnan(r["value"]))


#: the facts :func:`facts` computes (a rule naming another fails to load)
FACT_KEYS = frozenset(
    {"wide_deep.wide_over_deep_min", "wide_deep.wide_over_deep_median",
     "wide_deep.occupancy_wide_minus_deep_pct"}
)  # fmt: skip

"""The monitor's samples (kind ``monitor``) per sample and per engine, and notebook 16's facts. A
sample is *busy* when its labels name an engine, *idle* when none."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.gpm import gpm_wide

#: the dataset notebook 16 reads
MONITOR = "monitor_bench"
OCCUPANCY = "DCGM_FI_PROF_SM_OCCUPANCY"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
TENSOR = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
DRAM = "DCGM_FI_PROF_DRAM_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
POWER = "DCGM_FI_DEV_POWER_USAGE"
#: the fields in the order a dashboard shows them
FIELD_ORDER = (OCCUPANCY, SM_ACTIVE, TENSOR, DRAM, GPU_UTIL, FB_USED, SM_CLOCK, POWER)
LABEL_COLUMNS = ("workload", "model", "engine", "batch")
#: the GPM timeline (YOLOv8 width 1.0 at batch 1-128) whose windows give the same relation
GPM_BATCH = "gpm_batch_w1"
#: windows with less SM activity than this are left out of the occupancy / activity ratio
MIN_ACTIVE = 0.05
IDLE = "idle"


def wide(df: pd.DataFrame) -> pd.DataFrame:
    """One row per sample: ``t_s``, ``window_s``, the workload labels, ``state``, one column per
    field."""
    keys = ["t_s", "window_s", *[c for c in LABEL_COLUMNS if c in df]]
    d = df.copy()
    for c in ("workload", "model", "engine"):
        if c in d:
            d[c] = d[c].fillna("").astype(str)
    if "batch" in d:  # a sample without a batch keeps its row (group keys are never NaN)
        d["batch"] = pd.to_numeric(d["batch"], errors="coerce").astype(float).fillna(-1.0)
    w = d.pivot_table(index=keys, columns="metric", values="value", aggfunc="first")
    w = w.reset_index().sort_values("t_s", kind="stable")
    w.columns.name = None
    if "batch" in w:
        w["batch"] = w["batch"].where(w["batch"] >= 0)
    w = w.dropna(subset=[c for c in FIELD_ORDER if c in w], how="all")
    engine = w["engine"] if "engine" in w else pd.Series("", index=w.index)
    w["state"] = engine.map(lambda e: "busy" if e else IDLE)
    return w.reset_index(drop=True)


def per_engine(df: pd.DataFrame) -> pd.DataFrame:
    """Median of each field and the sample count per (engine, batch), idle as ``idle``, in run
    order."""
    w = wide(df)
    w["engine"] = w["engine"].where(w["engine"] != "", IDLE)
    fields = [c for c in FIELD_ORDER if c in w]
    keys = ["engine", "batch"] if "batch" in w else ["engine"]
    order = w.groupby(keys, dropna=False).t_s.min().rename("first_s")
    g = w.groupby(keys, dropna=False)[fields].median()
    g["samples"] = w.groupby(keys, dropna=False).size()
    g = g.join(order).sort_values("first_s").drop(columns="first_s")
    return g.reset_index()


def gpm_relation(gpm: pd.DataFrame) -> pd.DataFrame:
    """The run windows of a GPM timeline as ``sm_active``, ``sm_occupancy`` and their ratio (NaN
    below :data:`MIN_ACTIVE`)."""
    w = gpm_wide(gpm)
    w = w[(w["phase"] == "run") & ~w["straddles_mark"].astype(bool)]
    out = w[["config", "batch", "width"]].assign(
        sm_active=w["sm_util_pct"] / 100.0, sm_occupancy=w["sm_occupancy_pct"] / 100.0
    )
    out = out.dropna(subset=["sm_active", "sm_occupancy"])
    ratio = out["sm_occupancy"] / out["sm_active"]
    out["occupancy_over_active"] = ratio.where(out["sm_active"] >= MIN_ACTIVE)
    return out.reset_index(drop=True)


def facts(root, name: str = MONITOR) -> pd.DataFrame:
    """Medians over the busy samples: SM active, occupancy over active (ratios), GPU util - 100 x SM
    active (pp), busy over idle power (x)."""
    if not root.has(name):
        return facts_table([])
    w, ds = wide(root.load(name)), (name,)
    busy, idle = w[w.state == "busy"], w[w.state == IDLE]
    rows = []
    if SM_ACTIVE in w:
        rows.append(fact("monitor_sm_active_busy", busy[SM_ACTIVE].median(), "ratio", datasets=ds))
        if OCCUPANCY in w:
            b = busy[busy[SM_ACTIVE] > 0]
            ratio = (b[OCCUPANCY] / b[SM_ACTIVE]).median()
            rows.append(fact("monitor_occupancy_over_active_busy", ratio, "ratio", datasets=ds))
        if GPU_UTIL in w:
            pp = (busy[GPU_UTIL] - 100.0 * busy[SM_ACTIVE]).median()
            rows.append(fact("monitor_gpu_util_over_sm_active_pp", pp, "pp", datasets=ds))
    if POWER in w and (idle[POWER] > 0).any():
        ratio = busy[POWER].median() / idle[POWER].median()
        rows.append(fact("monitor_power_busy_over_idle", ratio, "x", datasets=ds))
    return facts_table(r for r in rows if not math.isnan(r["value"]))


#: the facts :func:`facts` computes (a rule naming another fails to load)
FACT_KEYS = frozenset(
    {"monitor_sm_active_busy", "monitor_occupancy_over_active_busy",
     "monitor_gpu_util_over_sm_active_pp", "monitor_power_busy_over_idle"}
)  # fmt: skip

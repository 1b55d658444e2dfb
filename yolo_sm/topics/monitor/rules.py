"""Headline findings of notebook 16 (live monitoring), as rules over the facts of
:func:`yolo_sm.topics.monitor.analyse.facts`."""

from __future__ import annotations

import pandas as pd

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.rules import Rule, check_unique, evaluate
from yolo_sm.topics.monitor import analyse as monitor

GROUP = "16_live_monitoring"
DATASETS = (monitor.MONITOR,)

RULES: tuple[Rule, ...] = check_unique(
    [
        Rule(
            id="monitor_bench_fills_the_sms",
            statement="While the bench runs, at least half of the SMs have a warp assigned "
            "(median DCGM_FI_PROF_SM_ACTIVE of the samples labelled with an engine)",
            fact="monitor_sm_active_busy",
            op=">=",
            threshold=0.5,
            partly=0.25,
            unit="ratio",
            datasets=DATASETS,
            group=GROUP,
        ),
        Rule(
            id="monitor_active_is_not_occupancy",
            statement="A busy SM holds warps in under half of its warp slots: SM occupancy is "
            "below half of SM activity while the bench runs (median of the ratio)",
            fact="monitor_occupancy_over_active_busy",
            op="<",
            threshold=0.5,
            partly=0.8,
            unit="ratio",
            datasets=DATASETS,
            group=GROUP,
        ),
        Rule(
            id="monitor_gpu_util_overstates",
            statement="The GPU utilisation nvidia-smi shows (DCGM_FI_DEV_GPU_UTIL) reads at "
            "least 10 percentage points above the share of SMs busy (100 x SM active) while "
            "the bench runs",
            fact="monitor_gpu_util_over_sm_active_pp",
            op=">=",
            threshold=10.0,
            partly=2.0,
            unit="pp",
            datasets=DATASETS,
            group=GROUP,
        ),
        Rule(
            id="monitor_power_follows_the_bench",
            statement="The GPU draws at least 1.5x its idle power while the bench runs "
            "(medians of the labelled and the unlabelled samples)",
            fact="monitor_power_busy_over_idle",
            op=">=",
            threshold=1.5,
            partly=1.1,
            unit="x",
            datasets=DATASETS,
            group=GROUP,
        ),
        Rule(
            id="monitor_gpm_active_is_not_occupancy",
            statement="In the shipped GPM timeline (one width, batch 1-128) a busy SM holds "
            "warps in under half of its warp slots: SM occupancy below half of SM activity "
            "(median over the run windows)",
            fact="monitor_gpm_occupancy_over_active",
            op="<",
            threshold=0.5,
            partly=0.8,
            unit="ratio",
            datasets=(monitor.GPM_BATCH,),
            group=GROUP,
        ),
    ]
)


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The findings' verdict table for ``root``."""
    return evaluate(RULES, monitor.facts(root), root.name)

"""The rules of notebook 16 (what a live GPU dashboard shows), as data. "The bench": the
samples labelled with an engine (every engine and batch the monitored bench ran)."""

from yolo_sm.report.rules import Rule, validate
from yolo_sm.topics.monitor.analyse import FACT_KEYS, MONITOR

_G, _D = "16_live_monitoring", (MONITOR,)

RULES: tuple[Rule, ...] = validate((
    Rule(id="monitor_active_is_not_occupancy", group=_G, datasets=_D,
         statement="A busy SM holds warps in under half of its warp slots: SM occupancy is "
         "below half of SM activity while the bench runs (median over its samples)",
         fact="monitor_occupancy_over_active_busy", op="<", threshold=0.5, partly=0.8,
         unit="ratio"),
    Rule(id="monitor_bench_fills_the_sms", group=_G, datasets=_D,
         statement="While the bench runs, at least half of the SMs have a warp assigned "
         "(median DCGM_FI_PROF_SM_ACTIVE over its samples)",
         fact="monitor_sm_active_busy", op=">=", threshold=0.5, partly=0.25, unit="ratio"),
    Rule(id="monitor_gpu_util_overstates", group=_G, datasets=_D,
         statement="The GPU utilisation nvidia-smi shows (DCGM_FI_DEV_GPU_UTIL) reads at "
         "least 10 percentage points above the share of SMs busy (100 x SM active) while "
         "the bench runs (median over its samples)",
         fact="monitor_gpu_util_over_sm_active_pp", op=">=", threshold=10.0, partly=2.0,
         unit="pp"),
    Rule(id="monitor_power_follows_the_bench", group=_G, datasets=_D,
         statement="The GPU draws at least 1.5x its idle power while the bench runs "
         "(medians of the labelled and the unlabelled samples)",
         fact="monitor_power_busy_over_idle", op=">=", threshold=1.5, partly=1.1, unit="x"),
), FACT_KEYS, _D)  # fmt: skip

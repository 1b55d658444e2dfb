"""Cold and warm torch.compile builds (dataset ``bench_compile_cache``, made by
:mod:`yolo_sm.topics.deploy.collect`): the builds side by side, and the cache's saving as a fact."""

from __future__ import annotations

from yolo_sm.analyse.facts import fact

DATASET = "bench_compile_cache"
COLUMNS = (
    "width", "batch", "compile_mode", "cache", "compile_cache", "autotuned_ops", "autotune_reads",
    "compile_s", "build_s", "process_s", "img_per_s", "median_ms", "status", "message",
)  # fmt: skip


def builds(table):
    """One row per build, cold before warm per (width, batch, mode): what the build found in
    the cache, its seconds and the compiled engine's img/s."""
    order = [c for c in ("width", "batch", "compile_mode", "run") if c in table]
    return table.sort_values(order)[[c for c in COLUMNS if c in table]].reset_index(drop=True)


def scope(mode: str, width: float, batch: int) -> str:
    return f"mode={mode}, width={float(width):g}, batch={int(batch)}"


def cache_facts(table) -> list[dict]:
    """Per (compile mode, width, batch) with an ok cold and warm build: cold over warm
    ``compile_s`` (``fast.cold_over_warm_compile``)."""
    ok = table[table["status"] == "ok"]
    rows = []
    for (mode, w, b), g in ok.groupby(["compile_mode", "width", "batch"]):
        cold, warm = g[g["cache"] == "cold"], g[g["cache"] == "warm"]
        if len(cold) and len(warm) and float(warm.compile_s.iloc[0]) > 0:
            ratio = float(cold.compile_s.iloc[0]) / float(warm.compile_s.iloc[0])
            rows.append(fact("fast.cold_over_warm_compile", ratio, "x", scope=scope(mode, w, b),
                             datasets=(DATASET,)))  # fmt: skip
    return rows

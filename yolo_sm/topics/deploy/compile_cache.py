"""Cold and warm torch.compile builds (dataset ``bench_compile_cache``, made by
``yolo_sm.topics.deploy.collect``): the builds side by side and the facts the fast-engines
findings are decided on. Every function takes a table and returns a table or facts; none
judges."""

from __future__ import annotations

from yolo_sm.analyse.facts import fact

DATASET = "bench_compile_cache"
COLUMNS = (
    "width", "batch", "compile_mode", "cache", "compile_cache", "autotuned_ops", "autotune_reads",
    "compile_s", "build_s", "process_s", "img_per_s", "median_ms", "status", "message",
)  # fmt: skip


def builds(table):
    """One row per build: width, batch, mode, planned cache state, what the build found, its
    seconds and the compiled engine's img/s, cold before warm per (width, batch, mode)."""
    cols = [c for c in COLUMNS if c in table]
    order = [c for c in ("width", "batch", "compile_mode", "run") if c in table]
    return table.sort_values(order)[cols].reset_index(drop=True)


def scope(mode: str, width: float, batch: int) -> str:
    """The scope of a per-build fact: ``"mode=default, width=0.5, batch=64"``."""
    return f"mode={mode}, width={float(width):g}, batch={int(batch)}"


def cache_facts(table) -> list[dict]:
    """Per (compile mode, width, batch) with an ok cold and warm build (:func:`scope`): the warm
    build's ``compile_s`` (``fast.warm_compile_s``), cold over warm ``compile_s``
    (``fast.cold_over_warm_compile``) and the warm build's img/s over the cold one's
    (``fast.warm_over_cold_img_per_s``: the cached graph runs as fast)."""
    d = (DATASET,)
    ok = table[table["status"] == "ok"]
    rows = []
    for (mode, w, b), g in ok.groupby(["compile_mode", "width", "batch"]):
        cold, warm = g[g["cache"] == "cold"], g[g["cache"] == "warm"]
        if cold.empty or warm.empty:
            continue
        cold_s, warm_s = float(cold.compile_s.iloc[0]), float(warm.compile_s.iloc[0])
        s = scope(mode, w, b)
        rows.append(fact("fast.warm_compile_s", warm_s, "s", scope=s, datasets=d))
        if warm_s > 0:
            rows.append(
                fact("fast.cold_over_warm_compile", cold_s / warm_s, "x", scope=s, datasets=d)
            )
        cold_img = float(cold.img_per_s.iloc[0])
        if cold_img > 0:
            ratio = float(warm.img_per_s.iloc[0]) / cold_img
            rows.append(fact("fast.warm_over_cold_img_per_s", ratio, "x", scope=s, datasets=d))
    return rows

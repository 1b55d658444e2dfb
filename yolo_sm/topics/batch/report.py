"""Notebook 03's sections: a root and dataset names in, tables and figures out, or one sentence
saying what the root lacks (:func:`~yolo_sm.report.plots.lacks`)."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse import gpm
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.schema import COLLECT_TASKS
from yolo_sm.report import plots, rules, tables
from yolo_sm.report.sections import Note
from yolo_sm.report.text import code
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.batch import multi_gpu
from yolo_sm.topics.batch import plots as batch_plots
from yolo_sm.topics.batch.rules import PAIR_RULES

# fmt: off


def show(items) -> None:
    """Show a section's items in a notebook: sentences printed, the rest displayed."""
    from IPython.display import display

    for item in [items] if isinstance(items, str) else items:
        print(item) if isinstance(item, str) and not isinstance(item, Note) else display(item)


def _sweep_table(root: DataRoot, sweep: str, sweep_1280: str | None = None):
    frames = [root.load(n) for n in (sweep, sweep_1280) if n and root.has(n)]
    return batch.batch_table(pd.concat(frames, ignore_index=True))


def _at_ref(table):
    return table[table.imgsz == batch.ref_imgsz(table)]


def throughput(root: DataRoot, sweep: str, sweep_1280: str | None = None) -> list:
    """img/s per batch (rows) and (backend, width) (columns) at 640 px, and the curves."""
    if not root.has(sweep):
        return [plots.lacks(root, sweep)]
    t = _at_ref(_sweep_table(root, sweep, sweep_1280))
    pivot = t.pivot_table(index="batch", columns=["backend", "width"], values="img_per_s")
    title = f"{batch.ref_imgsz(t)} px, {root.device_name()}: img/s and latency vs batch"
    return [tables.show(pivot), batch_plots.plot_batch_curves(t, title=title)]


def saturation(root: DataRoot, sweep: str, sweep_1280: str | None = None) -> list:
    """The knee table (:func:`yolo_sm.topics.batch.analyse.saturation`)."""
    if not root.has(sweep):
        return [plots.lacks(root, sweep)]
    return [tables.show(batch.saturation(_sweep_table(root, sweep, sweep_1280)))]


def explorer(root: DataRoot, sweep: str, width: float, backend: str) -> list:
    """The JupyterLab explorer and, for readers of the rendered page, its default figure."""
    if not root.has(sweep):
        return [plots.lacks(root, sweep)]
    s = root.load(sweep)
    t = _at_ref(batch.batch_table(s))
    width = batch.nearest(t.width, width)
    backend = backend if backend in set(t.backend) else sorted(t.backend)[0]
    frac = batch.SATURATION
    return [
        batch_plots.batch_explorer(s, width, backend, frac),
        batch_plots.plot_batch_detail(t, width, backend, frac),
    ]


def graph(root: DataRoot, sweep: str) -> list:
    """CUDA-graph speed-up per batch (rows) and width (columns) at 640 px, and its figure."""
    if not root.has(sweep):
        return [plots.lacks(root, sweep)]
    t = _at_ref(_sweep_table(root, sweep))
    if "cudagraph" not in set(t.backend):
        return [f"The sweep {sweep} of this root holds no CUDA-graph rows: no speed-up to show."]
    sp = batch.graph_speedup(t)
    pivot = sp.pivot_table(index="batch", columns="width", values="speedup")
    return [tables.show(pivot), batch_plots.plot_graph_speedup(sp)]


def coverage(root: DataRoot, ncu: str) -> list:
    """SM coverage per batch from Nsight Compute: the table and two figures."""
    if not root.has(ncu):
        return [plots.lacks(root, ncu)]
    n = root.load(ncu)
    cov = batch.ncu_coverage(n)
    return [
        tables.show(cov), batch_plots.plot_waves_ecdf(n), batch_plots.plot_occupancy_by_batch(cov),
    ]


def gpm_by(root: DataRoot, name: str, x: str = "batch", table: bool = True) -> list:
    """GPM medians per config of ``name`` against ``x`` (batch or width), table and figure."""
    if not root.has(name):
        return [plots.lacks(root, name)]
    med = gpm.gpm_medians(root.load(name))
    fig = batch_plots.plot_gpm_by(med, x, title=f"GPM medians vs {x}, {root.device_name()}")
    return [tables.show(med), fig] if table else [fig]


def memory(root: DataRoot, sweep: str, sweep_1280: str | None = None) -> list:
    """The memory lines with the article's 70 % budget, and peak memory against batch."""
    if not root.has(sweep):
        return [plots.lacks(root, sweep)]
    t = _sweep_table(root, sweep, sweep_1280)
    if "peak_mem_bytes" not in t or t.peak_mem_bytes.notna().sum() < 2:
        return [f"The sweep {sweep} of this root records no peak GPU memory: no memory lines."]
    fit = batch.memory_fit(t)
    budget = batch.memory_budget(fit, batch.gpu_memory(root.load(sweep)))
    budget = budget.drop(columns=["per_image_bytes", "intercept_bytes", "peak_at_max_batch_bytes"])
    return [tables.show(budget), batch_plots.plot_memory(t, fit)]


def graph_memory(root: DataRoot, sweep: str, pool_sweep: str) -> list:
    """Eager against CUDA graph memory, the graph's pool counted (``pool_sweep``'s rows in
    ``sweep``'s precisions)."""
    if not root.has(pool_sweep) or not root.has(sweep):
        return [plots.lacks(root, pool_sweep if not root.has(pool_sweep) else sweep)]
    p = root.load(pool_sweep)
    p = p[p.precision.isin(root.load(sweep).precision.unique())]
    if "peak_mem_bytes" not in p:
        return [f"The sweep {pool_sweep} of this root records no peak GPU memory."]
    return [tables.show(batch.graph_memory(batch.memory_fit(batch.batch_table(p))))]


def build(root: DataRoot, sweep: str, sweep_1280: str | None = None, top: int = 10) -> list:
    """Build peak against timed peak per point, largest build peak first."""
    if not root.has(sweep):
        return [plots.lacks(root, sweep)]
    t = _sweep_table(root, sweep, sweep_1280)
    if not {"build_peak_mem_bytes", "peak_mem_bytes"} <= set(t):
        return [f"The sweep {sweep} of this root records no build peak memory."]
    b = batch.build_vs_timed(t).sort_values("build_peak_mem_bytes", ascending=False)
    return [tables.show(b.head(top))]


def multi_gpu_section(multi: DataRoot | None, single: DataRoot | None) -> list:
    """A multi-GPU root against a one-GPU root: scaling, per-GPU ratios, tables, verdicts."""
    if multi is None or single is None or multi_gpu.workers(multi) < 2:
        return [
            Note(
                "Set `MULTI_GPU` (a root collected with `yolo-sm collect --workers N`) "
                "and `ONE_GPU` (the same steps on one GPU) to compare them here."
            )
        ]
    import plotly.express as px

    out = []
    if single.has(COLLECT_TASKS):
        tasks = [r.load(COLLECT_TASKS) for r in (multi, single)]
        runs = [
            multi_gpu.runs(t).assign(root=r.name)
            for t, r in zip(tasks, (multi, single), strict=True)
        ]
        out += [tables.show(multi_gpu.scaling(*tasks)), tables.show(pd.concat(runs))]
    shared = multi_gpu.shared_tables(multi, single)
    r = multi_gpu.all_ratios(shared).dropna(subset=["ratio"])
    if len(r):
        fig = px.box(
            r.sort_values("gpu_index").assign(gpu=r.gpu_index.map("GPU {:.0f}".format)), x="gpu",
            y="ratio", color="dataset", points="all",
            title=f"The same points on each GPU of {multi.name} over one GPU",
        )
        fig.add_hline(y=1.0, line_dash="dot")
        out += [tables.show(multi_gpu.gpu_spread(r)), fig]
    if shared:
        out.append(tables.show(multi_gpu.tables_match(shared)))
    else:
        out.append(Note(f"{code(multi.name)} and {code(single.name)} hold no table in common."))
    return [*out, rules.table(rules.evaluate(PAIR_RULES, multi_gpu.pair_facts(multi, single)))]

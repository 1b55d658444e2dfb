"""The sections of notebooks 03 (batch size) and 05 (SM timeline), one call each.

Each function takes a dataset root (:class:`yolo_sm.contract.datasets.DataRoot`) and the short
names of the datasets it reads, and returns what the notebook cell shows, in order: tables
(rounded DataFrames), plotly figures, a widget. Where the root lacks a dataset the section
returns one sentence instead (:func:`absent`), so the same notebook renders a GPU root and a
CPU root: ``show(section(...))``.
"""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse import gpm
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import tables
from yolo_sm.report.sections import Note
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.batch import plots as batch_plots
from yolo_sm.topics.compare import remeasure
from yolo_sm.topics.compare import remeasure_report as remeasure_plots
from yolo_sm.topics.timeline import analyse as timeline
from yolo_sm.topics.timeline import report as timeline_plots
from yolo_sm.topics.your_model.analyse import ModelView

#: what a dataset holds and why a root may lack it, by name prefix (longest match wins)
WHY = {
    "ncu_": (
        "Nsight Compute table",
        "it is collected on NVIDIA GPUs only (ncu replays each kernel with hardware counters)",
    ),
    "gpm_overhead": (
        "GPM sampler overhead table",
        "it is measured with NVML GPM, on NVIDIA GPUs of the Hopper generation or newer",
    ),
    "gpm_": (
        "NVML GPM timeline",
        "GPM counters exist on NVIDIA GPUs of the Hopper generation or newer only",
    ),
    "trace_": (
        "PyTorch-profiler kernel trace",
        "collect it with the plan step of that name on this machine",
    ),
    "sweep_1280": (
        "1280 px sweep",
        "it is a long GPU plan step, collected where a GPU has the time and memory for it",
    ),
    "sweep_": ("sweep", "collect it with the plan step of that name on this machine"),
}


def absent(root: DataRoot, name: str) -> str:
    """One sentence: ``root`` holds no dataset ``name``, what it would be and why it may be
    missing (e.g. "This root (cpu, AMD EPYC ...) holds no Nsight Compute table
    (ncu_batch_w1): it is collected on NVIDIA GPUs only ..."). One model's view (notebook 11)
    names its datasets by role, and says what it lacks itself (:meth:`ModelView.missing`)."""
    if isinstance(root, ModelView):
        return root.missing(name)
    what, why = next(
        (v for k, v in sorted(WHY.items(), key=lambda kv: -len(kv[0])) if name.startswith(k)),
        ("dataset", "collect it with the plan step of that name on this machine"),
    )
    device = root.device_name()  # the root's own name where its provenance names no machine
    who = root.name if device == root.name else f"{root.name}, {device}"
    return f"This root ({who}) holds no {what} ({name}): {why}."


def show(items) -> None:
    """Show a section's items in a notebook: sentences printed (one line each), the rest
    displayed."""
    from IPython.display import display

    if isinstance(items, str):  # one line (a section's Note) instead of a list
        items = [items]
    for item in items:
        if isinstance(item, Note):
            display(item)
        elif isinstance(item, str):
            print(item)
        else:
            display(item)


def _sweep_table(root: DataRoot, sweep: str, sweep_1280: str | None = None):
    frames = [root.load(n) for n in (sweep, sweep_1280) if n and root.has(n)]
    return batch.batch_table(pd.concat(frames, ignore_index=True))


def _at_ref(table):
    return table[table["imgsz"] == batch.ref_imgsz(table)]


# ---- notebook 03 --------------------------------------------------------------------------------


def throughput(root: DataRoot, sweep: str, sweep_1280: str | None = None) -> list:
    """img/s per batch (rows) and (backend, width) (columns) at 640 px, and the curves."""
    if not root.has(sweep):
        return [absent(root, sweep)]
    t = _at_ref(_sweep_table(root, sweep, sweep_1280))
    pivot = t.pivot_table(index="batch", columns=["backend", "width"], values="img_per_s")
    title = f"{batch.ref_imgsz(t)} px, {root.device_name()}: img/s and latency vs batch"
    return [tables.show(pivot), batch_plots.plot_batch_curves(t, title=title)]


def saturation(root: DataRoot, sweep: str, sweep_1280: str | None, frac: float) -> list:
    """The knee table (:func:`yolo_sm.topics.batch.analyse.saturation`) at share ``frac``; with the
    1280 px sweep where the root holds it (else a sentence saying so)."""
    if not root.has(sweep):
        return [absent(root, sweep)]
    out = [tables.show(batch.saturation(_sweep_table(root, sweep, sweep_1280), frac))]
    if sweep_1280 and not root.has(sweep_1280):
        out.append(absent(root, sweep_1280))
    return out


def explorer(root: DataRoot, sweep: str, width: float, backend: str, frac: float) -> list:
    """The JupyterLab explorer and, for readers of the rendered page, its default figure."""
    if not root.has(sweep):
        return [absent(root, sweep)]
    s = root.load(sweep)
    t = _at_ref(batch.batch_table(s))
    width = batch.nearest(t["width"], width)
    if backend not in set(t["backend"]):
        backend = sorted(t["backend"])[0]
    return [
        batch_plots.batch_explorer(s, width, backend, frac),
        batch_plots.plot_batch_detail(t, width, backend, frac),
    ]


def graph(root: DataRoot, sweep: str) -> list:
    """CUDA-graph speed-up per batch (rows) and width (columns) at 640 px, and its figure."""
    if not root.has(sweep):
        return [absent(root, sweep)]
    t = _at_ref(_sweep_table(root, sweep))
    if "cudagraph" not in set(t["backend"]):
        return [f"The sweep {sweep} of this root holds no CUDA-graph rows: no speed-up to show."]
    sp = batch.graph_speedup(t)
    pivot = sp.pivot_table(index="batch", columns="width", values="speedup")
    return [tables.show(pivot), batch_plots.plot_graph_speedup(sp)]


def coverage(root: DataRoot, ncu: str) -> list:
    """SM coverage per batch from Nsight Compute: the table and two figures."""
    if not root.has(ncu):
        return [absent(root, ncu)]
    n = root.load(ncu)
    cov = batch.ncu_coverage(n)
    return [
        tables.show(cov),
        batch_plots.plot_waves_ecdf(n),
        batch_plots.plot_occupancy_by_batch(cov),
    ]


def gpm_by(root: DataRoot, name: str, x: str = "batch", table: bool = True) -> list:
    """GPM medians per config of ``name`` against ``x`` (batch or width): the table (unless
    ``table`` is False) and the figure."""
    if not root.has(name):
        return [absent(root, name)]
    med = gpm.gpm_medians(root.load(name))
    title = f"GPM medians vs {x}, {root.device_name()}"
    fig = batch_plots.plot_gpm_by(med, x, title=title)
    return [tables.show(med), fig] if table else [fig]


def memory(root: DataRoot, sweep: str, sweep_1280: str | None = None) -> list:
    """The memory lines (:func:`yolo_sm.topics.batch.analyse.memory_budget` at the article's 70 %),
    and measured peak memory against batch with the fitted lines."""
    if not root.has(sweep):
        return [absent(root, sweep)]
    t = _sweep_table(root, sweep, sweep_1280)
    if "peak_mem_bytes" not in t or t["peak_mem_bytes"].notna().sum() < 2:
        return [f"The sweep {sweep} of this root records no peak GPU memory: no memory lines."]
    s = root.load(sweep)
    fit = batch.memory_fit(t)
    mem = s["prov_gpu_memory_bytes"].dropna() if "prov_gpu_memory_bytes" in s else s.index[:0]
    lines = batch.memory_budget(fit, float(mem.iloc[0])) if len(mem) else fit
    return [tables.show(batch.memory_table(lines)), batch_plots.plot_memory(t, fit)]


def graph_memory(root: DataRoot, sweep: str, pool_sweep: str) -> list:
    """Eager against CUDA graph memory with the graph's pool counted (the rows of
    ``pool_sweep`` in ``sweep``'s precisions)."""
    if not root.has(pool_sweep) or not root.has(sweep):
        return [absent(root, pool_sweep if not root.has(pool_sweep) else sweep)]
    p = root.load(pool_sweep)
    p = p[p["precision"].isin(root.load(sweep)["precision"].unique())]
    if "peak_mem_bytes" not in p:
        return [f"The sweep {pool_sweep} of this root records no peak GPU memory."]
    return [tables.show(batch.graph_memory(batch.memory_fit(batch.batch_table(p))))]


def build(root: DataRoot, sweep: str, sweep_1280: str | None = None, top: int = 10) -> list:
    """Build peak against timed peak per point, largest build peak first."""
    if not root.has(sweep):
        return [absent(root, sweep)]
    t = _sweep_table(root, sweep, sweep_1280)
    if not {"build_peak_mem_bytes", "peak_mem_bytes"} <= set(t):
        return [f"The sweep {sweep} of this root records no build peak memory."]
    b = batch.build_vs_timed(t)
    return [tables.show(b.sort_values("build_peak_mem_bytes", ascending=False).head(top))]


def repeat(root: DataRoot, sweep: str, again: str) -> list:
    """The points of ``sweep`` measured again in ``again``: the summary per kind and the
    figure."""
    if not root.has(sweep) or not root.has(again):
        return [absent(root, again if not root.has(again) else sweep)]
    cmp = remeasure.compare(root.load(sweep), root.load(again))
    if cmp.empty:
        return [f"{sweep} and {again} of this root share no point."]
    title = f"{sweep} measured again in {again}: new / first img/s"
    return [tables.show(remeasure.by_kind(cmp)), remeasure_plots.plot_compare(cmp, title=title)]


# ---- notebook 05 --------------------------------------------------------------------------------


def gpm_overhead(root: DataRoot, name: str) -> list:
    """The GPM sampler's cost per config (:func:`yolo_sm.analyse.gpm.gpm_overhead_table`)."""
    if not root.has(name):
        return [absent(root, name)]
    return [tables.show(gpm.gpm_overhead_table(root.load(name)))]


def gpm_timeline(root: DataRoot, name: str, vary: str = "batch") -> list:
    """The GPM timeline of ``name`` (configs varying in ``vary``) and its medians per config."""
    if not root.has(name):
        return [absent(root, name)]
    g = root.load(name)
    title = f"GPM timeline, {root.device_name()}: configs by {vary}"
    return [
        timeline_plots.plot_gpm_timeline(g, vary, title=title),
        tables.show(gpm.gpm_medians(g)),
    ]


def gaps(root: DataRoot, trace: str) -> list:
    """Launch gaps per forward of a Kineto trace: table, kernels of one forward, gap ECDF."""
    if not root.has(trace):
        return [absent(root, trace)]
    tr = root.load(trace)
    return [
        tables.show(timeline.launch_gaps(tr)),
        timeline_plots.plot_kernel_timeline(tr, iteration=0),
        timeline_plots.plot_gap_hist(tr),
    ]


def gaps_vs_sweep(root: DataRoot, trace: str, sweep: str) -> list:
    """The traced forwards beside the sweep's eager and CUDA-graph latency at the same width
    (:func:`yolo_sm.topics.timeline.analyse.launch_vs_sweep`)."""
    if not root.has(trace) or not root.has(sweep):
        return [absent(root, trace if not root.has(trace) else sweep)]
    g = timeline.launch_gaps(root.load(trace))
    width = batch.nearest(g["width"], batch.REF_WIDTH)
    t = batch.batch_table(root.load(sweep))
    return [tables.show(timeline.launch_vs_sweep(g, t, width))]

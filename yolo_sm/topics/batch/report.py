"""Notebook 03's figures (tables of :mod:`yolo_sm.topics.batch.analyse` in) and sections (a root
and dataset names in, tables and figures out, or :func:`~yolo_sm.report.plots.lacks`)."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse import gpm
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import with_config
from yolo_sm.contract.schema import COLLECT_TASKS
from yolo_sm.report import plots, rules, tables, widgets
from yolo_sm.report.colors import COLORS, TEMPLATE
from yolo_sm.report.sections import Note
from yolo_sm.report.style import finish
from yolo_sm.report.tables import code
from yolo_sm.topics.batch import analyse as batch
from yolo_sm.topics.batch import multi_gpu

# fmt: off

GPM_LABELS = {
    "sm_util_pct": "SM util (%)", "sm_occupancy_pct": "SM occupancy (%)",
    "tensor_util_pct": "tensor util (%)", "dram_bw_util_pct": "DRAM BW util (%)",
}


def short_label(label: str, vary: str = "batch") -> str:
    """``b16`` or ``w1.5`` for shading and legends ('' for unparseable labels)."""
    p = batch.parse_config(label)
    if p[vary] != p[vary]:  # NaN
        return ""
    return f"b{p['batch']}" if vary == "batch" else f"w{p['width']:g}"


def plot_batch_curves(table, title: str | None = None):
    """img/s and latency against batch per width, eager and CUDA graph; log axes."""
    import plotly.express as px

    long = table.assign(width=table["width"].map("{:g}".format)).melt(
        id_vars=["width", "backend", "batch"], value_vars=["img_per_s", "median_ms"],
        var_name="metric", value_name="value",
    )
    fig = px.line(
        long, x="batch", y="value", color="width", facet_col="backend", facet_row="metric",
        markers=True, log_x=True, log_y=True,
        category_orders={"metric": ["img_per_s", "median_ms"], "backend": ["eager", "cudagraph"]},
        color_discrete_sequence=px.colors.sequential.Viridis, template=TEMPLATE,
        title=title or "Throughput and latency vs batch", height=650,
    )
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.update_yaxes(title_text="img/s", row=2, col=1)
    fig.update_yaxes(title_text="latency per batch (ms)", row=1, col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return finish(fig)


def plot_batch_detail(table, width: float, backend: str, frac: float):
    """One (width, backend): img/s bars and latency line against batch, the knee marked."""
    from plotly.subplots import make_subplots

    g = table[(table["width"] == width) & (table["backend"] == backend)].sort_values("batch")
    if g.empty:
        raise ValueError(f"no ok rows for width {width} backend {backend}")
    knee = batch.saturation(g, frac)["knee_batch"].iloc[0]
    x = g["batch"].astype(str)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_bar(
        x=x,
        y=g["img_per_s"],
        name="img/s",
        marker_color=[COLORS.get(backend, "#636EFA") if b != knee else "#2CA02C" for b in g.batch],
        hovertemplate="batch %{x}<br>%{y:.0f} img/s<extra></extra>",
    )
    fig.add_scatter(
        x=x, y=g["median_ms"], name="latency (ms)", mode="lines+markers", line_color="black",
        secondary_y=True, hovertemplate="batch %{x}<br>%{y:.2f} ms<extra></extra>",
    )
    fig.update_layout(
        template=TEMPLATE,
        title=f"width {width:g}, {backend}: green bar = smallest batch reaching "
        f"{frac:.0%} of the best img/s",
        xaxis_title="batch",
    )
    fig.update_yaxes(title_text="img/s", secondary_y=False)
    fig.update_yaxes(title_text="latency per batch (ms)", rangemode="tozero", secondary_y=True)
    return finish(fig)


def plot_graph_speedup(speedup):
    """Eager / CUDA-graph latency per batch, one line per width."""
    import plotly.express as px

    d = speedup.assign(width=speedup["width"].map("{:g}".format))
    fig = px.line(
        d, x="batch", y="speedup", color="width", markers=True, log_x=True,
        color_discrete_sequence=px.colors.sequential.Viridis, hover_data=["eager", "cudagraph"],
        template=TEMPLATE, title="CUDA graph speed-up over eager (eager ms / graph ms, same sweep)",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    return finish(fig, y="eager latency / graph latency")


def batch_explorer(sweep, width: float, backend: str, frac: float):
    """JupyterLab explorer of :func:`plot_batch_detail` by width and backend."""
    import ipywidgets as W

    table = batch.batch_table(sweep)
    wd = W.Dropdown(options=sorted(table["width"].unique()), value=width, description="width")
    bd = W.Dropdown(options=sorted(table["backend"].unique()), value=backend, description="backend")

    def draw(width, backend):
        g = table[(table["width"] == width) & (table["backend"] == backend)]
        shown = tables.show(g.drop(columns=["imgsz", "width", "backend"]))
        return [plot_batch_detail(table, width, backend, frac), shown]

    return widgets.explorer([wd, bd], draw)


def plot_waves_ecdf(ncu):
    """Share of kernel time in kernels of at most x waves per SM, one curve per batch."""
    import plotly.express as px

    d = with_config(ncu).sort_values("batch")
    d = d.assign(batch=d["batch"].astype(str))
    fig = px.ecdf(
        d, x="waves_per_sm", y="duration_us", color="batch", ecdfnorm="probability", log_x=True,
        template=TEMPLATE,
        title="Share of kernel time in kernels with at most x waves per SM (Nsight Compute)",
    )
    fig.add_vline(x=1.0, line_dash="dot", annotation_text="one wave")
    fig.update_layout(xaxis_title="waves per SM", yaxis_title="share of kernel time")
    return finish(fig)


def plot_occupancy_by_batch(coverage):
    """Time-weighted occupancy per batch, and the kernel time under one wave."""
    import plotly.express as px

    long = coverage.assign(batch=coverage["batch"].astype(str)).melt(
        id_vars=["batch"], value_vars=["theoretical_occupancy_tw_pct", "achieved_occupancy_tw_pct"],
        var_name="occupancy", value_name="pct",
    )
    long["occupancy"] = long["occupancy"].str.split("_").str[0]
    fig = px.bar(
        long, x="batch", y="pct", color="occupancy", barmode="group", template=TEMPLATE,
        title="Time-weighted occupancy per batch (Nsight Compute)",
    )
    fig.add_scatter(
        x=coverage["batch"].astype(str), y=100 * coverage["time_under_1_wave"],
        mode="lines+markers", name="kernel time under one wave (%)", line_color="black",
    )
    fig.update_layout(yaxis_title="percent", yaxis_range=[0, 100])
    return finish(fig)


def plot_gpm_by(medians, x: str = "batch", title: str | None = None):
    """GPM medians per config against ``x`` (batch or width), one line per metric."""
    import plotly.express as px

    metrics = [m for m in batch.GPM_METRICS if m in medians]
    long = medians.melt(id_vars=[x], value_vars=metrics, var_name="metric", value_name="pct")
    long["metric"] = long["metric"].map(GPM_LABELS)
    fig = px.line(
        long, x=x, y="pct", color="metric", markers=True, log_x=x == "batch", template=TEMPLATE,
        title=title or f"GPM medians over each run vs {x}",
    )
    fig.update_layout(yaxis_title="percent (median of ~0.1 s windows)", yaxis_range=[0, 100])
    return finish(fig)


def plot_memory(table, fit):
    """Peak memory against batch and the fitted lines, a panel per (size, backend); log axes."""
    import plotly.express as px

    d = table.dropna(subset=["peak_mem_bytes"]).assign(
        gb=lambda x: x.peak_mem_bytes / 1e9, w=lambda x: x.width.map("{:g}".format)
    )
    sizes, widths = sorted(d.imgsz.unique()), sorted(d.width.unique())
    palette = px.colors.sample_colorscale(
        "Viridis", [i / max(1, len(widths) - 1) for i in range(len(widths))]
    )
    cmap = {f"{w:g}": c for w, c in zip(widths, palette, strict=True)}
    fig = px.scatter(
        d, x="batch", y="gb", color="w", facet_col="backend", facet_row="imgsz", log_x=True,
        log_y=True, color_discrete_map=cmap, hover_data=["width", "backend", "median_ms"],
        category_orders={"backend": ["eager", "cudagraph"], "imgsz": sizes, "w": list(cmap)},
        labels={"w": "width"}, template=TEMPLATE, height=350 * len(sizes) + 100,
        title="Peak GPU memory during the timed forwards vs batch: measured (dots), fitted lines",
    )
    for ri, size in enumerate(sizes):  # px puts the first facet row on top
        bs = sorted(d[d.imgsz == size].batch.unique())
        for ci, be in enumerate(("eager", "cudagraph"), start=1):
            for r in fit[(fit.imgsz == size) & (fit.backend == be)].itertuples():
                y = [(r.intercept_bytes + r.per_image_bytes * b) / 1e9 for b in bs]
                fig.add_scatter(
                    x=bs, y=y, mode="lines", showlegend=False, hoverinfo="skip",
                    line={"color": cmap[f"{r.width:g}"], "width": 1}, row=len(sizes) - ri, col=ci,
                )
    fig.update_yaxes(title_text="GB (10⁹ bytes)", col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return finish(fig)



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
    return [tables.show(pivot), plot_batch_curves(t, title=title)]


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
        batch_explorer(s, width, backend, frac),
        plot_batch_detail(t, width, backend, frac),
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
    return [tables.show(pivot), plot_graph_speedup(sp)]


def coverage(root: DataRoot, ncu: str) -> list:
    """SM coverage per batch from Nsight Compute: the table and two figures."""
    if not root.has(ncu):
        return [plots.lacks(root, ncu)]
    n = root.load(ncu)
    cov = batch.ncu_coverage(n)
    return [
        tables.show(cov), plot_waves_ecdf(n), plot_occupancy_by_batch(cov),
    ]


def gpm_by(root: DataRoot, name: str, x: str = "batch", table: bool = True) -> list:
    """GPM medians per config of ``name`` against ``x`` (batch or width), table and figure."""
    if not root.has(name):
        return [plots.lacks(root, name)]
    med = gpm.gpm_medians(root.load(name))
    fig = plot_gpm_by(med, x, title=f"GPM medians vs {x}, {root.device_name()}")
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
    return [tables.show(budget), plot_memory(t, fit)]


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
    pair_rules = rules.topic_rules("batch", "pair_rules.toml")
    return [*out, rules.table(rules.evaluate(pair_rules, multi_gpu.pair_facts(multi, single)))]

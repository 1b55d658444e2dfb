"""Figures and tables of the two-models notebook (17)."""

from __future__ import annotations

from yolo_sm.analyse.gpm import wide
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import tables
from yolo_sm.report.colors import KERNEL_CLASS_COLORS, TEMPLATE
from yolo_sm.report.sections import needs, section
from yolo_sm.report.style import finish
from yolo_sm.topics.batch.report import GPM_LABELS
from yolo_sm.topics.sharing import analyse as sharing

MODE_TEXT = {"alone_a": "a alone", "alone_b": "b alone", "streams": "two streams",
             "processes": "two processes"}  # fmt: skip
ENGINE_COLORS = {"a": "#1F3A5F", "b": "#E69F00"}
POWER_COLOR = "#CC79A7"


def _engine_text(df):
    return df.engine + ": width " + df.width.map("{:g}".format) + ", batch " + df.batch.astype(str)


def plot_throughput(table):
    """img/s of each engine per mode, stacked, one panel per pair."""
    import plotly.express as px

    d = table.assign(mode_text=table["mode"].map(MODE_TEXT), engine_text=_engine_text(table))
    fig = px.bar(d, x="mode_text", y="img_per_s", color="engine", facet_col="pair",
                 hover_data=["engine_text", "p50_ms", "p99_ms", "batches"],
                 category_orders={"mode_text": list(MODE_TEXT.values()), "engine": ["a", "b"]},
                 color_discrete_map=ENGINE_COLORS, template=TEMPLATE,
                 title="Images per second of each engine, alone and together")  # fmt: skip
    fig.for_each_annotation(lambda a: a.update(text=f"pair {a.text.split('=')[-1]}"))
    fig.update_xaxes(title_text="how the engines ran")
    fig.update_yaxes(title_text="images per second", col=1)
    fig.update_yaxes(matches=None, showticklabels=True)
    return finish(fig)


def plot_latency(table):
    """p50 (bar) and p99 (tick) batch latency (ms, log) per engine and mode, a panel per pair."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    pairs = list(dict.fromkeys(table.pair))
    fig = make_subplots(rows=1, cols=len(pairs), subplot_titles=[f"pair {p}" for p in pairs])
    for col, pair in enumerate(pairs, start=1):
        g = table[table.pair == pair]
        for eng in ("a", "b"):
            e = g[g.engine == eng].set_index("mode").reindex(list(MODE_TEXT))
            e = e.dropna(subset=["config"])
            x = [MODE_TEXT[m] for m in e.index]
            c, first = ENGINE_COLORS[eng], col == 1
            fig.add_trace(go.Bar(x=x, y=e.p50_ms, name=f"engine {eng} p50", legendgroup=eng,
                                 marker_color=c, offsetgroup=eng, showlegend=first),
                          row=1, col=col)  # fmt: skip
            tick = {"symbol": "line-ew-open", "size": 18, "color": c}
            fig.add_trace(go.Scatter(x=x, y=e.p99_ms, mode="markers", name=f"engine {eng} p99",
                                     legendgroup=eng, marker=tick, showlegend=first),
                          row=1, col=col)  # fmt: skip
        fig.update_yaxes(type="log", row=1, col=col)
    fig.update_yaxes(title_text="GPU time per batch (ms)", col=1)
    fig.update_xaxes(title_text="how the engines ran")
    fig.update_layout(template=TEMPLATE, barmode="group",
                      title="Batch latency per engine: p50 (bars) and p99 (ticks)")  # fmt: skip
    return finish(fig)


def plot_timeline(gpm):
    """GPM SM and tensor utilisation and occupancy (%) with board power (W), runs shaded."""
    from plotly.subplots import make_subplots

    g = gpm[[c for c in gpm.columns if not c.startswith("prov_")]]
    w = wide(g).sort_values("t_s").reset_index(drop=True)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    run = w[(w["phase"] == "run") & (w["config"].fillna("") != "")]
    spans = run.assign(t0=run.t_s - run.window_s).groupby("config", sort=False)
    shades = ("#DCE6F7", "#F7E3DC")
    for i, (cfg, s) in enumerate(spans):
        x0, x1 = float(s.t0.min()), float(s.t_s.max())
        fig.add_vrect(
            x0=x0, x1=x1, fillcolor=shades[i % 2], opacity=0.6, line_width=0, layer="below"
        )
        pair, _, mode = str(cfg).rpartition(" ")
        fig.add_annotation(x=(x0 + x1) / 2, y=1.0, yref="paper", yanchor="bottom",
                           text=f"{pair}<br>{MODE_TEXT.get(mode, mode)}", showarrow=False,
                           font={"size": 9})  # fmt: skip
    colours = {
        "sm_util_pct": "#1F3A5F",
        "sm_occupancy_pct": "#009E73",
        "tensor_util_pct": "#D55E00",
    }
    for m, c in colours.items():
        if m in w:
            fig.add_scatter(x=w.t_s, y=w[m], mode="lines", line_shape="vh", name=GPM_LABELS[m],
                            line={"color": c, "width": 1.3}, secondary_y=False)  # fmt: skip
    if "power_w" in w:
        dot = {"color": POWER_COLOR, "width": 1.3, "dash": "dot"}
        fig.add_scatter(x=w.t_s, y=w.power_w, mode="lines", name="board power (W)", line=dot,
                        secondary_y=True)  # fmt: skip
        fig.update_yaxes(title_text="board power (W)", rangemode="tozero", secondary_y=True)
    fig.update_yaxes(title_text="percent", range=[0, 105], secondary_y=False)
    fig.update_xaxes(title_text="time since sampler start (s)")
    fig.update_layout(template=TEMPLATE, height=480, margin={"t": 120},
                      title="GPM timeline and board power while the engines run",
                      legend={"orientation": "h", "y": -0.2})  # fmt: skip
    return finish(fig)


def plot_kernel_classes(slow):
    """Kernel time per batch by class, alone and on two streams, a panel per (pair, engine)."""
    import pandas as pd
    import plotly.express as px

    long = pd.concat([slow.assign(run="alone", us=slow.alone_us_per_batch),
                      slow.assign(run="two streams", us=slow.together_us_per_batch)])  # fmt: skip
    long["panel"] = long.pair + " · engine " + long.engine
    fig = px.bar(long, x="run", y="us", color="kernel_class", facet_col="panel",
                 facet_col_wrap=2, color_discrete_map=KERNEL_CLASS_COLORS,
                 hover_data=["slowdown", "overlap_share"], template=TEMPLATE,
                 title="Kernel time per batch by class, alone and together")  # fmt: skip
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(matches=None, showticklabels=True, title_text="")
    fig.update_yaxes(title_text="kernel time per batch (µs)", col=1)
    fig.update_xaxes(title_text="run")
    fig.update_layout(height=520)
    return finish(fig)


rates = section(sharing.DATASET, sharing.rates, tables.show)
totals = section(sharing.DATASET, sharing.totals, tables.show)
settings = section(sharing.DATASET, sharing.settings, tables.show)
throughput_figure = section(sharing.DATASET, plot_throughput)
latency_figure = section(sharing.DATASET, plot_latency)
timeline_figure = section(sharing.GPM, plot_timeline)
kernel_table = section(sharing.KERNELS, sharing.kernel_slowdown, tables.show)
kernel_figure = section(sharing.KERNELS, sharing.kernel_slowdown, plot_kernel_classes)


SWEEP = "sweep_fp16_nhwc"


def plot_sweep_alone(alone):
    """img/s of each pair's engines alone, as the width x batch sweep measured them."""
    import plotly.express as px

    d = alone.assign(engine_text=_engine_text(alone))
    fig = px.bar(d, x="engine_text", y="img_per_s", color="engine", facet_col="pair",
                 hover_data=["median_ms"], color_discrete_map=ENGINE_COLORS, template=TEMPLATE,
                 title="The engines alone in the width x batch sweep")  # fmt: skip
    fig.for_each_annotation(lambda a: a.update(text=f"pair {a.text.split('=')[-1]}"))
    fig.update_xaxes(matches=None, title_text="engine")
    fig.update_yaxes(title_text="images per second", col=1)
    return finish(fig)


@needs(SWEEP)
def sweep_alone(root: DataRoot):
    """The pairs' engines alone in the sweep (its own run), table and figure."""
    alone = sharing.sweep_alone(root.load(SWEEP))
    if alone.empty:
        return tables.show(alone)
    return plot_sweep_alone(alone)

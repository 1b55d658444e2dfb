"""Rooflines, memory and launch counts (notebook 06).

Which layers are bound by memory bandwidth and which by compute, what activations cost in memory,
what the NCHW layout costs in transform kernels, and how many kernels a forward launches.

Two kinds of roofline:

* **absolute** (YOLOv8): FLOPs and bytes per layer counted from the model (a shape-only forward on
  the meta device, :func:`layer_traffic`) against the layer's measured kernel time from Nsight
  Compute -> achieved TFLOP/s and GB/s, under ceilings given as parameters. The defaults
  (:func:`default_peaks`) are yolo_sm's own measurements (plan step ``ceilings``) when shipped,
  else the project brief's reference figures of this machine kind; :func:`ceiling_note` says
  which.
* **normalised** (ResNet-101, wide conv stack): Nsight Compute's ``sm_throughput_pct`` and
  ``dram_throughput_pct`` are each a percentage of the hardware's own peak, so no ceiling has to be
  assumed: a kernel near 100 % DRAM and low SM is bandwidth-bound, the reverse compute-bound.

Bytes are a lower bound on traffic: ``min_bytes`` counts the weights, the layer's inputs and its
output once (what a fully fused layer would have to move); ``conv_bytes`` counts every convolution
inside the layer reading its input and weights and writing its output (what unfused eager convs
move). Eager PyTorch moves more still: its bias, activation and residual kernels re-read and
re-write activations.
"""

from __future__ import annotations

from functools import lru_cache

from yolo_sm.plots import KERNEL_CLASS_COLORS, TEMPLATE, _color_map
from yolo_sm.profiling.target import parse_config
from yolo_sm.profiling.target import with_config as _with_config

#: Device-to-device copy bandwidth measured on this machine kind (H200), as the project brief
#: reports it (../shared/h200/README.md); NOT measured by yolo_sm. The datasheet says 4.8 TB/s.
REFERENCE_PEAK_GBPS = 4300.0  # kept for readers; default_peaks() prefers measurements
REFERENCE_NOTE = (
    "reference ceilings of this machine kind from the project brief (dense fp16 matmul, "
    "device-to-device copy), not measured by yolo_sm"
)


def ceiling_source(peak_tflops: float, peak_gbps: float) -> str:
    """A few words for a legend: whether ``peak_tflops`` / ``peak_gbps`` are yolo_sm's own
    measured ceilings, the brief's reference figures, or the user's."""
    from yolo_sm.claims import PEAK_FP16_TFLOPS

    if (peak_tflops, peak_gbps) == default_peaks():
        measured = ceiling_note() != REFERENCE_NOTE
        return "measured by yolo_sm" if measured else "reference, not measured"
    if peak_tflops == PEAK_FP16_TFLOPS:
        return "reference, not measured"
    return "set by the user"


def ceiling_note() -> str:
    """Where the default ceilings come from (measured by yolo_sm, or the brief's figures)."""
    from yolo_sm.claims import peak_copy_gbps, peak_fp16_tflops

    (_, a), (_, b) = peak_fp16_tflops(), peak_copy_gbps()
    if "measured" in a and "measured" in b:
        return "ceilings measured by yolo_sm on this GPU (h200/ceilings)"
    return REFERENCE_NOTE


#: A throughput at or above this percentage of its peak counts as "high" (Nsight Compute's
#: speed-of-light guidance treats ~60 % as good use of a unit).
HIGH_PCT = 60.0
BOUNDS = ("memory-bound", "compute-bound", "neither (latency / under-used)")
BOUND_COLORS = dict(zip(BOUNDS, ("#1F77B4", "#D62728", "#7F7F7F"), strict=True))
THROUGHPUT_COLS = (
    "achieved_occupancy_pct",
    "sm_throughput_pct",
    "dram_throughput_pct",
    "tensor_pipe_pct",
)
#: The columns of :func:`roofline_table` worth reading first.
ROOF_COLUMNS = (
    "width",
    "layer",
    "module_type",
    "kernels",
    "time_us",
    "flops_batch",
    "min_bytes",
    "conv_bytes",
    "intensity",
    "conv_intensity",
    "achieved_tflops",
    "achieved_gbps",
    "pct_of_roof",
    "side",
)


def default_peaks() -> tuple[float, float]:
    """(peak TFLOP/s, peak GB/s): yolo_sm's own measurement (``h200/ceilings``) when shipped,
    else the project brief's reference figures (``claims.peak_fp16_tflops`` /
    ``claims.peak_copy_gbps`` say which)."""
    from yolo_sm.claims import peak_copy_gbps, peak_fp16_tflops

    return float(peak_fp16_tflops()[0]), float(peak_copy_gbps()[0])


def with_config(df, col: str = "config"):
    """A copy of ``df`` with family, width, precision, layout and batch parsed from ``col``."""
    return _with_config(df, col, strict=True)


# ---------------------------------------------------------------- counting (CPU, meta device)


@lru_cache(maxsize=16)
def yolo_model(width: float, family: str = "yolov8", depth: float = 0.33):
    """A YOLO model for counting only (no BN calibration: FLOPs and shapes do not depend on
    weights); cached, as ultralytics' constructor runs a CPU forward."""
    from yolo_sm.models import build_yolo

    return build_yolo(family, float(width), depth=depth, calibrate=False)


@lru_cache(maxsize=4)
def resnet_model(depth: int = 101):
    """The ResNet detector of :func:`yolo_sm.models.resnet_backbone` (same trunk, BN folded, same
    head), built without its BN calibration, which only sets values: for counting."""
    import torchvision

    from yolo_sm.models.resnet import ResNetDetector, _fuse_resnet

    trunk = getattr(torchvision.models, f"resnet{depth}")(weights=None).eval()
    _fuse_resnet(trunk)
    return ResNetDetector(trunk, nc=1, anchors=2).eval()


@lru_cache(maxsize=64)
def yolo_traffic(width: float, imgsz: int = 640, batch: int = 1, bytes_per_element: int = 2,
                 family: str = "yolov8", depth: float = 0.33):  # fmt: skip
    """:func:`layer_traffic` of :func:`yolo_model`, cached (do not modify the result)."""
    return layer_traffic(yolo_model(width, family, depth), imgsz, batch, bytes_per_element)


def layer_traffic(model, imgsz: int = 640, batch: int = 1, bytes_per_element: int = 2):
    """The channel table (:func:`yolo_sm.models.channel_table`) plus, per layer and for a batch:
    ``flops_batch``, ``weight_bytes``, ``in_bytes`` (its 4-D inputs), ``out_bytes``,
    ``min_bytes`` (weights + inputs + output once), ``conv_bytes`` (every conv inside reading its
    input and weights and writing its output), and the arithmetic intensities
    ``intensity`` = flops / min_bytes and ``conv_intensity`` = flops / conv_bytes (FLOP/byte)."""
    from yolo_sm.models import channel_table

    ct = channel_table(model, imgsz, bytes_per_element)
    b = bytes_per_element
    out = ct.copy()
    out["batch"] = batch
    out["flops_batch"] = out.flops * batch
    out["weight_bytes"] = out.params * b
    out["in_bytes"] = out.in_elems.astype("int64") * b * batch
    out["out_bytes"] = out.activation_bytes * batch
    out["min_bytes"] = out.weight_bytes + out.in_bytes + out.out_bytes
    out["conv_bytes"] = (out.conv_io_elems * batch + out.conv_weight_elems).astype("int64") * b
    out["intensity"] = out.flops_batch / out.min_bytes
    out["conv_intensity"] = (out.flops_batch / out.conv_bytes).where(out.conv_bytes > 0)
    return out


# ---------------------------------------------------------------- absolute roofline (YOLOv8)


def layer_times(ncu, by=("config", "layer")):
    """Kernel count and summed kernel time (us) per config and layer of a per-kernel table."""
    g = ncu.groupby(list(by), observed=True).duration_us.agg(kernels="size", time_us="sum")
    return g.reset_index()


def roofline_table(
    ncu,
    widths=None,
    *,
    peak_tflops: float | None = None,
    peak_gbps: float | None = None,
    imgsz: int = 640,
    family: str = "yolov8",
    depth: float = 0.33,
):
    """One row per (config, layer) of a YOLO Nsight Compute table: FLOPs and bytes counted from
    the model at the config's width and batch, measured kernel time, achieved TFLOP/s and GB/s
    (of ``min_bytes``), the roof at the layer's intensity, the share of it achieved, and the side
    of the ridge point (``memory`` below it, ``compute`` above; zero-FLOP layers: ``memory``)."""
    import numpy as np
    import pandas as pd

    d_tflops, d_gbps = default_peaks()
    peak_tflops = d_tflops if peak_tflops is None else float(peak_tflops)
    peak_gbps = d_gbps if peak_gbps is None else float(peak_gbps)
    times = layer_times(ncu)
    rows = []
    for cfg, t in times.groupby("config"):
        c = parse_config(cfg)
        if c["family"] != family or (widths is not None and c["width"] not in widths):
            continue
        bpe = 4 if c["precision"] in ("fp32", "tf32") else 2
        lt = yolo_traffic(c["width"], imgsz, c["batch"], bpe, family, depth)
        rows.append(t.merge(lt, on="layer", how="inner").assign(**c))
    if not rows:
        raise ValueError("no config of the table matches the requested family / widths")
    df = pd.concat(rows, ignore_index=True)
    sec = df.time_us * 1e-6
    df["achieved_tflops"] = df.flops_batch / sec / 1e12
    df["achieved_gbps"] = df.min_bytes / sec / 1e9
    df["conv_gbps"] = df.conv_bytes / sec / 1e9
    roof = np.minimum(peak_tflops, df.intensity * peak_gbps / 1e3)
    df["roof_tflops"] = roof
    df["pct_of_roof"] = np.where(df.flops > 0, 100 * df.achieved_tflops / roof, np.nan)
    df["pct_of_peak_gbps"] = 100 * df.achieved_gbps / peak_gbps
    ridge = peak_tflops * 1e3 / peak_gbps
    df["side"] = np.where(df.intensity >= ridge, "compute", "memory")
    df.attrs.update(peak_tflops=peak_tflops, peak_gbps=peak_gbps, ridge=ridge)
    return df.sort_values(["width", "index"]).reset_index(drop=True)


def plot_roofline(table, *, color="module_type", symbol=None, title=None):
    """Log-log roofline: achieved TFLOP/s against arithmetic intensity (FLOP per byte of
    ``min_bytes``) per layer, under the table's ceilings (``table.attrs``); marker size ~ time.
    Layers without FLOPs (Concat, Upsample) cannot sit on a log axis and are left out."""
    import numpy as np
    import plotly.express as px

    pk, bw, ridge = (table.attrs[k] for k in ("peak_tflops", "peak_gbps", "ridge"))
    d = table[table.flops > 0].copy()
    d["width"] = d.width.astype(str)
    fig = px.scatter(
        d,
        x="intensity",
        y="achieved_tflops",
        color=color,
        symbol=symbol,
        size="time_us",
        size_max=28,
        log_x=True,
        log_y=True,
        hover_data=[
            "config",
            "layer",
            "module_type",
            "kernels",
            "time_us",
            "achieved_gbps",
            "pct_of_roof",
        ],
        template=TEMPLATE,
        title=title or "Roofline of YOLOv8 layers (fp16 NHWC, Nsight Compute kernel time)",
    )
    lo = min(d.intensity.min() / 2, ridge / 50)
    hi = max(d.intensity.max() * 2, ridge * 5)
    xs = np.geomspace(lo, hi, 200)
    fig.add_scatter(
        x=xs,
        y=np.minimum(pk, xs * bw / 1e3),
        mode="lines",
        line={"color": "black", "dash": "dash"},
        name=f"roof: {pk:.0f} TFLOP/s, {bw / 1e3:.1f} TB/s ({ceiling_source(pk, bw)})",
    )
    top = max(pk, d.achieved_tflops.max()) * 1.5
    bottom = min(d.achieved_tflops.min(), lo * bw / 1e3) / 1.5
    fig.add_scatter(
        x=[ridge, ridge],
        y=[bottom, top],
        mode="lines",
        line={"color": "grey", "dash": "dot"},
        name=f"ridge point {ridge:.0f} FLOP/B",
    )
    fig.update_xaxes(range=[np.log10(lo), np.log10(hi)])  # log axes take log10 ranges
    fig.update_yaxes(range=[np.log10(bottom), np.log10(top)])
    fig.update_layout(
        xaxis_title="arithmetic intensity (FLOP per byte of weights + inputs + output, fp16)",
        yaxis_title="achieved TFLOP/s",
        legend={"font": {"size": 10}},
    )
    fig.add_annotation(
        text=f"Ceilings: {ceiling_note()}",
        xref="paper",
        yref="paper",
        x=0,
        y=-0.16,
        showarrow=False,
        font={"size": 11, "color": "#555"},
    )
    fig.update_layout(margin={"b": 90})
    return fig


def plot_layer_heatmap(table, value="pct_of_roof", *, title=None, fmt=".0f", colorscale="Viridis"):
    """Layer x width heatmap of ``value`` (default: % of the roof achieved), text in cells."""
    import plotly.graph_objects as go

    order = table.drop_duplicates("layer").sort_values("index")
    labels = [f"{r.layer} {r.module_type}" for r in order.itertuples()]
    piv = table.pivot_table(index="layer", columns="width", values=value).reindex(order.layer)
    fig = go.Figure(
        go.Heatmap(
            z=piv.values,
            x=[str(w) for w in piv.columns],
            y=labels,
            colorscale=colorscale,
            texttemplate=f"%{{z:{fmt}}}",
            colorbar={"title": value},
            hovertemplate="%{y}<br>width %{x}<br>%{z:.3g}<extra></extra>",
        )
    )
    fig.update_layout(
        template=TEMPLATE,
        title=title or value,
        xaxis_title="width",
        yaxis={"autorange": "reversed"},
        height=650,
    )
    return fig


def side_summary(table):
    """Per width: layers and time below / above the ridge point, and the time-weighted share of
    the roof achieved on each side."""
    import pandas as pd

    def agg(g):
        f = g[g.flops > 0]
        return pd.Series(
            {
                "layers": len(g),
                "time_us": g.time_us.sum(),
                "memory_side_layers": int((g.side == "memory").sum()),
                "memory_side_time_share": g.time_us[g.side == "memory"].sum() / g.time_us.sum(),
                "tflops_forward": g.flops_batch.sum() / g.time_us.sum() / 1e6,
                "pct_of_roof_tw": (f.pct_of_roof * f.time_us).sum() / f.time_us.sum(),
                "median_intensity": f.intensity.median(),
            }
        )

    return table.groupby("width")[list(table.columns)].apply(agg).reset_index()


# ---------------------------------------------------------------- normalised roofline (ncu %)


def bound_of(sm_pct, dram_pct, high: float = HIGH_PCT):
    """``memory-bound`` where DRAM throughput >= ``high`` % and >= SM throughput,
    ``compute-bound`` where SM throughput >= ``high`` % and above DRAM, else ``neither``.
    Works on scalars and on pandas Series."""
    import numpy as np

    sm, dram = np.asarray(sm_pct, dtype=float), np.asarray(dram_pct, dtype=float)
    out = np.where(
        (dram >= high) & (dram >= sm),
        BOUNDS[0],
        np.where((sm >= high) & (sm > dram), BOUNDS[1], BOUNDS[2]),
    )
    return out if out.ndim else str(out)


def throughput_view(ncu, by, high: float = HIGH_PCT, cols=THROUGHPUT_COLS):
    """Per group: kernels, time, time-weighted achieved occupancy, SM / DRAM / tensor-pipe
    throughput (% of peak), the bound of the group's averages (:func:`bound_of`), and the share of
    its time spent in kernels that are each bound on their own (kernels differ within a stage).
    Of ``cols``, those the table lacks (a throughput set without achieved occupancy) are left
    out."""
    from yolo_sm.analysis import time_weighted

    by = [by] if isinstance(by, str) else list(by)
    df = ncu.assign(bound=bound_of(ncu.sm_throughput_pct, ncu.dram_throughput_pct, high))
    out = time_weighted(df, by, [c for c in cols if c in ncu])
    out["bound"] = bound_of(out.sm_throughput_tw_pct, out.dram_throughput_tw_pct, high)
    shares = (
        df.pivot_table(index=by, columns="bound", values="duration_us", aggfunc="sum")
        .reindex(columns=list(BOUNDS))
        .fillna(0.0)
    )
    shares = shares.div(shares.sum(axis=1), axis=0)
    shares.columns = [f"time_share_{b.split(' ')[0]}" for b in shares.columns]
    out = out.merge(shares.reset_index(), on=by, how="left")
    out["time_share"] = out.time_us / out.time_us.sum()
    return out


def resnet_stages(ncu, depth: int = 101, imgsz: int = 640, high: float = HIGH_PCT):
    """ResNet stages (stem, layer1-4, head) in forward order: :func:`throughput_view` per stage
    joined with FLOPs and bytes counted from the model at the table's batch, and achieved
    TFLOP/s. Kernels outside every stage range (layer '') are left out."""
    from yolo_sm.models.resnet import ResNetDetector

    cfg = parse_config(ncu.config.iloc[0])
    k = ncu[ncu.layer.isin(ResNetDetector.STAGES)]
    view = throughput_view(k, "layer", high)
    lt = layer_traffic(resnet_model(depth), imgsz, cfg["batch"])
    cols = ["index", "layer", "flops_batch", "min_bytes", "intensity", "params"]
    out = lt[cols].merge(view, on="layer", how="inner").sort_values("index")
    out["achieved_tflops"] = out.flops_batch / (out.time_us * 1e-6) / 1e12
    return out.reset_index(drop=True)


def resnet_claim(stages, early=("stem", "layer1"), deep=("layer3", "layer4"), high=HIGH_PCT):
    """Verdict on "early ResNet layers are bandwidth-bound, deep layers compute-bound" from
    :func:`resnet_stages`: ``holds`` when every early stage is memory-bound and every deep stage
    compute-bound; ``partly holds`` when only the direction is right (DRAM % falls and tensor-pipe
    % rises from the early to the deep stages, time-weighted) or one half holds; else
    ``does not hold``. Returns a dict with the figures behind it."""
    s = stages.set_index("layer")

    def tw(names, col):
        g = s.loc[list(names)]
        return float((g[col] * g.time_us).sum() / g.time_us.sum())

    e_dram, d_dram = tw(early, "dram_throughput_tw_pct"), tw(deep, "dram_throughput_tw_pct")
    e_sm, d_sm = tw(early, "sm_throughput_tw_pct"), tw(deep, "sm_throughput_tw_pct")
    e_tp, d_tp = tw(early, "tensor_pipe_tw_pct"), tw(deep, "tensor_pipe_tw_pct")
    early_mem = all(s.loc[n, "bound"] == BOUNDS[0] for n in early)
    deep_comp = all(s.loc[n, "bound"] == BOUNDS[1] for n in deep)
    direction = e_dram > d_dram and d_tp > e_tp
    if early_mem and deep_comp:
        verdict = "holds"
    elif early_mem or deep_comp or direction:
        verdict = "partly holds"
    else:
        verdict = "does not hold"
    return {
        "verdict": verdict,
        "early_memory_bound": early_mem,
        "deep_compute_bound": deep_comp,
        "direction_right": direction,
        "early_dram_pct": e_dram,
        "deep_dram_pct": d_dram,
        "early_sm_pct": e_sm,
        "deep_sm_pct": d_sm,
        "early_tensor_pct": e_tp,
        "deep_tensor_pct": d_tp,
        "max_stage_dram_pct": float(s.dram_throughput_tw_pct.max()),
        "max_stage_sm_pct": float(s.sm_throughput_tw_pct.max()),
        "high_pct": high,
    }


def plot_normalised_roofline(
    df,
    *,
    x="dram_throughput_pct",
    y="sm_throughput_pct",
    color="kernel_class",
    size="duration_us",
    facet_col=None,
    hover=(),
    high: float = HIGH_PCT,
    title=None,
):
    """SM throughput % against DRAM throughput % (each of the hardware's own peak) per kernel or
    group: the lower right is bandwidth-bound, the upper left compute-bound, the lower left
    neither (latency, launch or occupancy limits). Shaded bands mark the ``high`` threshold."""
    import plotly.express as px

    cmap = {**KERNEL_CLASS_COLORS, **BOUND_COLORS, **_color_map(df[color].unique())}
    fig = px.scatter(
        df,
        x=x,
        y=y,
        color=color,
        size=size,
        size_max=30,
        facet_col=facet_col,
        hover_data=[c for c in hover if c in df],
        color_discrete_map=cmap,
        template=TEMPLATE,
        title=title or "Normalised roofline: SM vs DRAM throughput (% of the GPU's own peak)",
    )
    fig.add_shape(
        type="rect", x0=high, x1=100, y0=0, y1=high, fillcolor="#1F77B4", opacity=0.08,
        line_width=0, row="all", col="all",
    )  # fmt: skip
    fig.add_shape(
        type="rect", x0=0, x1=high, y0=high, y1=100, fillcolor="#D62728", opacity=0.08,
        line_width=0, row="all", col="all",
    )  # fmt: skip
    fig.add_shape(
        type="line", x0=0, y0=0, x1=100, y1=100, line={"dash": "dot", "color": "grey"},
        row="all", col="all",
    )  # fmt: skip
    fig.update_xaxes(range=[0, 100], title_text="DRAM throughput (% of peak)")
    fig.update_yaxes(range=[0, 100], title_text="SM throughput (% of peak)", col=1)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.add_annotation(
        text="blue band: bandwidth-bound · red band: compute-bound · lower left: neither",
        xref="paper", yref="paper", x=0, y=-0.22, showarrow=False, font={"size": 11},
    )  # fmt: skip
    fig.update_layout(margin={"b": 100})
    return fig


def plot_stage_bars(stages, *, title=None):
    """Grouped bars per ResNet stage: time-weighted achieved occupancy, SM %, DRAM %, tensor
    pipe %, with the ``high`` threshold as a line."""
    import plotly.express as px

    cols = {
        "achieved_occupancy_tw_pct": "achieved occupancy",
        "sm_throughput_tw_pct": "SM throughput",
        "dram_throughput_tw_pct": "DRAM throughput",
        "tensor_pipe_tw_pct": "tensor pipe",
    }
    long = stages.melt(id_vars=["layer"], value_vars=list(cols), var_name="metric")
    long["metric"] = long.metric.map(cols)
    fig = px.bar(
        long,
        x="layer",
        y="value",
        color="metric",
        barmode="group",
        template=TEMPLATE,
        title=title or "ResNet-101 per stage (time-weighted, % of peak)",
        color_discrete_sequence=["#7F7F7F", "#D62728", "#1F77B4", "#9467BD"],
    )
    fig.add_hline(y=HIGH_PCT, line_dash="dot", annotation_text=f"{HIGH_PCT:.0f} %")
    fig.update_layout(yaxis_title="% (time-weighted over the stage's kernels)", xaxis_title="")
    return fig


# ---------------------------------------------------------------- YOLOv8: occupancy vs throughput

#: Theoretical occupancy (%) under which claim 6 calls an inference service wasteful.
OCC_CUT = 60.0
#: The columns a side of :func:`yolo_occupancy_vs_throughput` is averaged over (time-weighted).
YOLO_THROUGHPUT_COLS = (
    "theoretical_occupancy_pct",
    "sm_throughput_pct",
    "tensor_pipe_pct",
    "dram_throughput_pct",
)


def _sides(cut: float) -> tuple[str, str]:
    return f"< {cut:g} %", f">= {cut:g} %"


def yolo_kernels(ncu, cut: float = OCC_CUT):
    """A YOLO Nsight Compute per-kernel table (e.g. ``h200/ncu_throughput_w1``) with the config
    parsed (:func:`with_config`), ``kernel_class`` (:func:`yolo_sm.kernels.add_kernel_class`),
    ``blocks_per_sm`` (resident blocks per SM: the smallest of the ``limit_*`` columns) and
    ``occupancy``, the side of ``cut`` its theoretical occupancy falls on."""
    import numpy as np

    from yolo_sm.errors import UserError
    from yolo_sm.kernels import add_kernel_class

    if ncu is None or len(ncu) == 0:
        raise UserError("no kernels: the Nsight Compute table is absent or empty")
    df = with_config(ncu if "kernel_class" in ncu else add_kernel_class(ncu))
    limits = [c for c in df.columns if c.startswith("limit_")]
    if limits:
        df["blocks_per_sm"] = df[limits].min(axis=1)
    below, above = _sides(cut)
    df["occupancy"] = np.where(df.theoretical_occupancy_pct < cut, below, above)
    return df


def yolo_occupancy_vs_throughput(ncu, cut: float = OCC_CUT, high: float = HIGH_PCT):
    """Per config (width) and side of ``cut`` % theoretical occupancy (both sides, an empty one
    with 0 kernels): kernels, time, ``time_share`` of the config's kernel time, the
    time-weighted theoretical occupancy, SM / tensor-pipe / DRAM throughput (% of peak) and bound
    (:func:`throughput_view`), the occupancy range, the share of the side's time at one resident
    block per SM (``one_block_time_share``) and its kernel classes by time (``classes``)."""
    import pandas as pd

    df = yolo_kernels(ncu, cut)
    keys = ["config", "width", "occupancy"]
    view = throughput_view(df, keys, high, YOLO_THROUGHPUT_COLS)
    g = df.groupby(keys)
    extra = pd.DataFrame(
        {
            "occupancy_min_pct": g.theoretical_occupancy_pct.min(),
            "occupancy_max_pct": g.theoretical_occupancy_pct.max(),
            "classes": g[["kernel_class", "duration_us"]].apply(
                lambda k: ", ".join(
                    k.groupby("kernel_class").duration_us.sum().sort_values(ascending=False).index
                )
            ),
        }
    )
    if "blocks_per_sm" in df:
        one = df.duration_us.where(df.blocks_per_sm == 1, 0.0)
        extra["one_block_time_share"] = (
            one.groupby([df[k] for k in keys]).sum() / g.duration_us.sum()
        )
    view = view.merge(extra.reset_index(), on=keys, how="left")
    full = (
        df[["config", "width"]]
        .drop_duplicates()
        .merge(pd.DataFrame({"occupancy": list(_sides(cut))}), how="cross")
    )
    out = full.merge(view, on=keys, how="left")
    out[["kernels", "time_us"]] = out[["kernels", "time_us"]].fillna(0)
    out["kernels"] = out.kernels.astype(int)
    out["time_share"] = out.time_us / out.groupby("config").time_us.transform("sum")
    out.attrs["cut"] = cut
    return out.sort_values(["width", "occupancy"], ascending=[True, False]).reset_index(drop=True)


def yolo_stage_throughput(ncu, cut: float = OCC_CUT, high: float = HIGH_PCT):
    """Per config (width) and stage (backbone, neck, head, forward order):
    :func:`throughput_view` with the stage's ``time_share`` of the config's kernel time and the
    share of the stage's time in kernels under ``cut`` % theoretical occupancy."""
    import pandas as pd

    df = yolo_kernels(ncu, cut)
    keys = ["config", "width", "stage"]
    out = throughput_view(df, keys, high, YOLO_THROUGHPUT_COLS)
    out["time_share"] = out.time_us / out.groupby("config").time_us.transform("sum")
    below = df.duration_us.where(df.occupancy == _sides(cut)[0], 0.0)
    low = below.groupby([df[k] for k in keys]).sum() / df.groupby(keys).duration_us.sum()
    out = out.merge(low.rename("low_occupancy_time_share").reset_index(), on=keys, how="left")
    order = list(df.sort_values("kernel_id").stage.drop_duplicates()) if "kernel_id" in df else None
    out["stage"] = pd.Categorical(out.stage, categories=order or sorted(out.stage.unique()))
    out.attrs["cut"] = cut
    return out.sort_values(["width", "stage"]).reset_index(drop=True)


def plot_yolo_occupancy(kernels, *, high: float = HIGH_PCT, title=None):
    """:func:`plot_normalised_roofline` of :func:`yolo_kernels`: one point per kernel, coloured by
    the side of the occupancy cut, one panel per width."""
    d = kernels.assign(width=kernels.width.astype(str))
    return plot_normalised_roofline(
        d,
        color="occupancy",
        facet_col="width",
        hover=[
            "layer",
            "stage",
            "kernel_class",
            "theoretical_occupancy_pct",
            "tensor_pipe_pct",
            "blocks_per_sm",
            "kernel_name",
        ],  # fmt: skip
        high=high,
        title=title
        or "YOLOv8 kernels per width (panels), by theoretical occupancy: normalised roofline",
    )


def _pcts(rows, col, fmt=".0f") -> str:
    """'12 / 34 / 56': a column's values joined (a missing one as '-')."""
    import pandas as pd

    return " / ".join("-" if pd.isna(v) else f"{v:{fmt}}" for v in rows[col])


def occupancy_sides(split):
    """(under, at or above): the rows of :func:`yolo_occupancy_vs_throughput` on each side of
    its cut, in width order."""
    below, above = _sides(split.attrs.get("cut", OCC_CUT))
    lo = split[split.occupancy == below].sort_values("width").reset_index(drop=True)
    hi = split[split.occupancy == above].sort_values("width").reset_index(drop=True)
    return lo, hi


def low_occupancy_is_busiest(split) -> bool:
    """Whether, at the widest config of :func:`yolo_occupancy_vs_throughput`, the kernels under
    the cut keep the tensor pipes busier than the rest and the SMs at least as busy."""
    lo, hi = occupancy_sides(split)
    a, b = lo.iloc[-1], hi.iloc[-1]
    return bool(
        a.tensor_pipe_tw_pct > b.tensor_pipe_tw_pct
        and a.sm_throughput_tw_pct >= b.sm_throughput_tw_pct
    )


def yolo_occupancy_findings(split, stages, high: float = HIGH_PCT) -> str:
    """Markdown bullets from :func:`yolo_occupancy_vs_throughput` and
    :func:`yolo_stage_throughput`: where the time goes, whether the kernels under the cut are the
    ones with the highest SM / tensor-pipe throughput, and how that changes with width."""
    cut = split.attrs.get("cut", OCC_CUT)
    lo, hi = occupancy_sides(split)
    if lo.empty:
        return "- No kernels."
    widths = " / ".join(f"{w:g}" for w in lo.width)
    totals = split.groupby("width").kernels.sum().to_frame()
    first, last = lo.iloc[0], lo.iloc[-1]
    busy = lo[lo.kernels > 0]
    occ = (
        f"{busy.occupancy_min_pct.min():g}-{busy.occupancy_max_pct.max():g} %" if len(busy) else ""
    )
    classes = ", ".join(dict.fromkeys(c for cs in busy.classes for c in cs.split(", ")))
    one = (
        f", {_pcts(lo, 'one_block_time_share', '.0%')} of their time at one resident block per SM"
        if "one_block_time_share" in lo
        else ""
    )

    def where(col):
        more = lo[col].to_numpy() > hi[col].to_numpy()
        yes = [f"{w:g}" for w, m in zip(lo.width, more, strict=True) if m]
        no = [f"{w:g}" for w, m in zip(lo.width, more, strict=True) if not m]
        if not no:
            return "at every width"
        if not yes:
            return "at no width"
        return f"at width {', '.join(yes)} only (not at {', '.join(no)})"

    st = stages.sort_values(["width", "stage"])
    names = list(st.stage.cat.categories if hasattr(st.stage, "cat") else dict.fromkeys(st.stage))
    per_w = "; ".join(
        f"{_pcts(g, 'time_share', '.0%')} at width {w:g}" for w, g in st.groupby("width")
    )
    tops = st.loc[st.groupby("width").low_occupancy_time_share.idxmax()]
    if tops.stage.nunique() == 1:
        top = (
            f"the {tops.stage.iloc[0]} has the largest share of its own time under the cut at "
            f"every width ({_pcts(tops, 'low_occupancy_time_share', '.0%')})"
        )
    else:
        top = "the stage with the largest share of its own time under the cut is " + ", ".join(
            f"the {r.stage} at width {r.width:g} ({r.low_occupancy_time_share:.0%})"
            for r in tops.itertuples()
        )
    stage_txt = f"Kernel time per stage ({' / '.join(names)}): {per_w}; {top}."
    bounds = "; ".join(
        f"{b} at width {', '.join(f'{w:g}' for w in g.width)}"
        for b, g in busy.groupby("bound", sort=False)
    )
    dram_max = split.dram_throughput_tw_pct.max()
    dram = (
        f"DRAM throughput stays under {high:g} % on both sides"
        if dram_max < high
        else "DRAM throughput"
    )
    verdict = (
        f"At width {last.width:g} the kernels under {cut:g} % occupancy are the busiest of the "
        "forward by both measures: low theoretical occupancy does not mean low throughput."
        if low_occupancy_is_busiest(split)
        else f"At width {last.width:g} the kernels under {cut:g} % occupancy are not the busiest "
        "by both measures."
    )
    return f"""
- **Where the time goes (widths {widths}).** Kernels under {cut:g} % theoretical occupancy take
  {_pcts(lo, "time_share", ".0%")} of the forward's kernel time ({_pcts(lo, "kernels", "d")} of
  {_pcts(totals, "kernels", "d")} kernels): {classes} at {occ} theoretical occupancy{one}.
  {stage_txt}
- **Tensor pipes.** Time-weighted, the kernels under the cut keep the tensor pipes
  {_pcts(lo, "tensor_pipe_tw_pct")} % busy against {_pcts(hi, "tensor_pipe_tw_pct")} % for the
  rest: higher {where("tensor_pipe_tw_pct")}.
- **SM throughput.** Under the cut {_pcts(lo, "sm_throughput_tw_pct")} % of peak against
  {_pcts(hi, "sm_throughput_tw_pct")} % for the rest: higher {where("sm_throughput_tw_pct")}.
  {dram} ({_pcts(lo, "dram_throughput_tw_pct")} % under the cut against
  {_pcts(hi, "dram_throughput_tw_pct")} %). By the {high:g} % rule the kernels under the cut are,
  on their time-weighted averages, {bounds}.
- **From width {first.width:g} to {last.width:g}** the share of time under the cut goes from
  {first.time_share:.0%} to {last.time_share:.0%}, their tensor pipe from
  {first.tensor_pipe_tw_pct:.0f} % to {last.tensor_pipe_tw_pct:.0f} % and their SM throughput from
  {first.sm_throughput_tw_pct:.0f} % to {last.sm_throughput_tw_pct:.0f} %. {verdict}
"""


# ---------------------------------------------------------------- activations and layout


def activation_table(widths=(0.25, 0.5, 1.0, 1.5, 2.0), imgsz=640, bytes_per_element=2):
    """Per width and layer: output activation bytes per image (fp16 by default) from the channel
    table, with the layer's weight bytes for comparison."""
    import pandas as pd

    rows = []
    for w in widths:
        ct = yolo_traffic(float(w), imgsz, 1, bytes_per_element)
        rows.append(
            ct.assign(
                width=float(w),
                activation_mb=ct.activation_bytes / 1e6,
                weight_mb=ct.params * bytes_per_element / 1e6,
                label=ct.layer + " " + ct.module_type,
            )
        )
    return pd.concat(rows, ignore_index=True)


def plot_activations(act, *, title=None):
    """Bars: activation MB per image per layer, one colour per width."""
    import plotly.express as px

    d = act.assign(width=act.width.astype(str))
    fig = px.bar(
        d,
        x="label",
        y="activation_mb",
        color="width",
        barmode="group",
        hover_data=["out_channels", "out_h", "out_w", "weight_mb"],
        template=TEMPLATE,
        title=title or "Output activation per image and layer (fp16, 640x640)",
    )
    fig.update_layout(xaxis_title="", yaxis_title="MB per image (fp16)")
    return fig


def layout_compare(ncu, precision="fp16"):
    """Per layout at one precision (Nsight Compute per-kernel table with ``config``): summed
    forward kernel time, kernel count, layout-transform kernels, their time and shares, and the
    time ratio to NHWC."""

    from yolo_sm.kernels import add_kernel_class

    df = with_config(ncu if "kernel_class" in ncu else add_kernel_class(ncu))
    df = df[df.precision == precision]
    tr = df.kernel_class == "layout_transform"
    out = (
        df.assign(_tr_t=df.duration_us.where(tr, 0.0), _tr_n=tr.astype(int))
        .groupby(["config", "layout"])
        .agg(
            kernels=("duration_us", "size"),
            forward_us=("duration_us", "sum"),
            transform_kernels=("_tr_n", "sum"),
            transform_us=("_tr_t", "sum"),
        )
        .reset_index()
    )
    out["transform_time_share"] = out.transform_us / out.forward_us
    out["transform_launch_share"] = out.transform_kernels / out.kernels
    base = out.set_index("layout").forward_us.get("nhwc")
    out["time_vs_nhwc"] = out.forward_us / base if base else float("nan")
    return out


# ---------------------------------------------------------------- launch counts


def launches_per_type(trace, iteration: int = 0):
    """Kernels per forward per config and module type (Kineto trace, one iteration), with each
    type's share of the forward's launches and of its kernel time."""
    t = trace[trace.iteration == iteration]
    g = t.groupby(["config", "module_type"]).duration_us.agg(kernels="size", time_us="sum")
    g = g.reset_index()
    tot = g.groupby("config")[["kernels", "time_us"]].transform("sum")
    g["launch_share"] = g.kernels / tot.kernels
    g["time_share"] = g.time_us / tot.time_us
    g["width"] = g.config.map(lambda c: parse_config(c)["width"])
    return g.sort_values(["width", "kernels"], ascending=[True, False]).reset_index(drop=True)


def fusion_bound(trace, iteration: int = 0, fused_type: str = "C2f"):
    """Per config: launches per forward, those inside ``fused_type`` layers, how many such layers,
    and the share of all launches removed if each such layer became one kernel
    (``removed_share``), against fusing every layer into one kernel (``all_layers_removed_share``).
    An upper bound; :func:`fusion_measured` is what a real fusing engine did."""
    import pandas as pd

    t = trace[trace.iteration == iteration]
    rows = []
    for cfg, g in t.groupby("config"):
        f = g[g.module_type == fused_type]
        total, nf, layers = len(g), len(f), f.layer.nunique()
        all_layers = g.layer[g.layer != ""].nunique() + int((g.layer == "").any())
        rows.append(
            {
                "config": cfg,
                "width": parse_config(cfg)["width"],
                "launches": total,
                f"{fused_type}_layers": layers,
                f"{fused_type}_launches": nf,
                f"{fused_type}_launch_share": nf / total,
                f"{fused_type}_time_share": f.duration_us.sum() / g.duration_us.sum(),
                "removed_share": (nf - layers) / total,
                "layers": all_layers,
                "all_layers_removed_share": (total - all_layers) / total,
            }
        )
    return pd.DataFrame(rows).sort_values("width").reset_index(drop=True)


def fusion_measured(kernels, eager: str = "eager", fused: str = "compile"):
    """What a measured fusion did, next to :func:`fusion_bound`'s bound: kernel launches and
    summed GPU kernel time per forward of an eager and a fusing engine (e.g. torch.compile) of
    the same model config, from one Kineto table whose ``config`` names the engine (as
    :func:`yolo_sm.views.fast.compare_backends` builds it), and the share of the eager launches
    and kernel time that the fusing engine removed."""
    import pandas as pd

    from yolo_sm.errors import UserError
    from yolo_sm.views.fast import kernels_per_forward

    missing = [c for c in (eager, fused) if c not in set(kernels.config)]
    if missing:
        raise UserError(f"no kernels of {', '.join(missing)} in the table")
    g = kernels.groupby("config")
    n_iter = g.iteration.nunique()
    per = pd.DataFrame(
        {
            "launches": kernels_per_forward(kernels),
            "kernel_ms": g.duration_us.sum() / n_iter / 1e3,
            "forwards": n_iter,
        }
    )
    e = per.loc[eager]
    out = per.loc[[eager, fused]].rename_axis("engine").reset_index()
    out["removed_launch_share"] = 1 - out.launches / e.launches
    out["removed_time_share"] = 1 - out.kernel_ms / e.kernel_ms
    return out


def launch_cost(sweep, trace, batch: int = 1, precision="fp16", layout="nhwc", iteration=0):
    """Per width: eager and CUDA-graph latency at ``batch`` from a sweep (same run), the time the
    graph saves, the kernels per forward (from the trace, its own batch) and the saving per
    launch in us. A CUDA graph keeps every kernel but issues them in one call, so the saving is
    the host's launch cost (an estimate: the trace's batch may differ from ``batch``)."""
    s = sweep[
        (sweep.status == "ok")
        & (sweep.batch == batch)
        & (sweep.precision == precision)
        & (sweep.layout == layout)
    ]
    p = s.pivot_table(index="width", columns="backend", values="median_ms")
    k = trace[trace.iteration == iteration].groupby("config").size()
    k.index = [parse_config(c)["width"] for c in k.index]
    out = p[["eager", "cudagraph"]].reset_index()
    out["graph_saves_ms"] = out.eager - out.cudagraph
    out["kernels_per_forward"] = out.width.map(k)
    out["saved_us_per_launch"] = 1e3 * out.graph_saves_ms / out.kernels_per_forward
    t = trace[trace.iteration == iteration]
    if {parse_config(c)["batch"] for c in t.config.unique()} == {batch}:  # same batch only
        gpu = t.groupby("config").duration_us.sum() / 1e3
        gpu.index = [parse_config(c)["width"] for c in gpu.index]
        out["gpu_kernel_ms"] = out.width.map(gpu)
        out["gpu_idle_share_eager"] = 1 - out.gpu_kernel_ms / out.eager
    out = out.dropna(subset=["kernels_per_forward"]).reset_index(drop=True)
    out.attrs["batch"] = batch
    return out


def plot_launches(per_type, *, title=None):
    """Stacked bars: kernels per forward per module type, per width."""
    import plotly.express as px

    d = per_type.assign(width=per_type.width.astype(str))
    fig = px.bar(
        d,
        x="width",
        y="kernels",
        color="module_type",
        hover_data=["launch_share", "time_share", "time_us"],
        template=TEMPLATE,
        title=title or "Kernel launches per forward by layer type (Kineto, iteration 0)",
    )
    fig.update_layout(xaxis_title="width", yaxis_title="kernels per forward", barmode="stack")
    return fig


# ---------------------------------------------------------------- findings text


def _elementwise_ops(ncu) -> str:
    """'139 add, 101 clamp (ReLU)': elementwise kernels by op, unnamed ops named from the kernel."""
    e = ncu[ncu.kernel_class == "elementwise"]
    ops = e.op.where(e.op != "", e.kernel_name.str.contains("clamp").map({True: "clamp (ReLU)"}))
    return ", ".join(f"{n} {op}" for op, n in ops.fillna("other").value_counts().items())


def findings_markdown(
    *,
    stages,
    claim,
    resnet,
    wide_blocks,
    roof,
    sides,
    act,
    layout,
    fusion,
    cost,
    cost8,
    high,
    fused=None,
    fused_label: str = "",
) -> str:
    """The notebook's findings, every figure computed from the tables passed in (``fused``:
    :func:`fusion_measured`, described by ``fused_label``, e.g. the model config)."""
    c, st = claim, stages.set_index("layer")
    stage_txt = ", ".join(
        f"{n} DRAM {r.dram_throughput_tw_pct:.0f} % / SM {r.sm_throughput_tw_pct:.0f} % / "
        f"tensor {r.tensor_pipe_tw_pct:.0f} %"
        for n, r in st.iterrows()
    )
    mb = st["time_share_memory-bound"]
    inside = resnet[resnet.layer != ""]
    ew = inside.kernel_class == "elementwise"
    ew_l1 = inside[ew & (inside.layer == "layer1")].duration_us.sum() / st.loc["layer1", "time_us"]
    ew_all = inside[ew].duration_us.sum() / inside.duration_us.sum()
    l3 = st.loc["layer3"]
    compute_stages = ", ".join(st.index[st.bound == BOUNDS[1]]) or "none"
    wb = wide_blocks
    wide_bounds = ", ".join(f"{n} {b}" for b, n in wb.bound.value_counts().items())
    w0, w3 = wb[wb.stage == wb.stage.min()], wb[wb.stage == wb.stage.max()]
    pk, bw, ridge = (roof.attrs[k] for k in ("peak_tflops", "peak_gbps", "ridge"))
    mid_w = roof.width.iloc[(roof.width - 1.0).abs().argmin()]
    mid = roof[roof.width == mid_w]
    fl = mid[mid.flops > 0]
    mem_layers = ", ".join(fl[fl.side == "memory"].layer) or "none"
    zero = mid[mid.flops == 0]
    s0, s1 = sides.iloc[0], sides.iloc[-1]
    a = act[act.width == mid_w]
    lay = layout.set_index("layout")
    nchw, nhwc = lay.loc["nchw"], lay.loc["nhwc"]
    f_mid = fusion.iloc[(fusion.width - 1.0).abs().argmin()]
    holds11 = "holds" if fusion.removed_share.min() > 0.9 else "does not hold"
    idle_hi, idle_lo = cost8.gpu_idle_share_eager.idxmax(), cost8.gpu_idle_share_eager.idxmin()
    all_lo, all_hi = fusion.all_layers_removed_share.min(), fusion.all_layers_removed_share.max()
    dir_txt = "right" if c["direction_right"] else "not what the claim says"
    per_kernel = 1e3 * cost.eager / cost.kernels_per_forward  # us per kernel, per width
    per_kernel_lo, per_kernel_hi = per_kernel.min(), per_kernel.max()
    measured_txt = ""
    if fused is not None and len(fused) == 2:
        e, f = fused.iloc[0], fused.iloc[1]
        lead = (
            "Measured, a real fusing compiler does less than that bound"
            if f.removed_launch_share < fusion.removed_share.min()
            else "Measured"
        )
        measured_txt = (
            f" {lead}: {f.engine} ({fused_label}) launches {f.launches:.0f} kernels per forward "
            f"against {e.engine}'s {e.launches:.0f} (-{f.removed_launch_share:.0%}) and runs "
            f"{f.kernel_ms:.1f} ms of GPU kernels against {e.kernel_ms:.1f} ms "
            f"(-{f.removed_time_share:.0%})."
        )
    return f"""
**ResNet-101 (fp16 NHWC, batch 8).** Per stage, time-weighted: {stage_txt}. No stage reaches
{high:.0f} % DRAM throughput (the highest is {c["max_stage_dram_pct"]:.0f} %); {compute_stages}
reaches {high:.0f} % SM throughput. The early stages (stem, layer1) use {c["early_dram_pct"]:.0f} %
of DRAM bandwidth against {c["deep_dram_pct"]:.0f} % for the deep ones (layer3, layer4), and the
tensor pipes go from {c["early_tensor_pct"]:.0f} % to {c["deep_tensor_pct"]:.0f} %.
**Claim "early ResNet-101 layers are bandwidth-bound, deep layers compute-bound":
{c["verdict"]}** — the direction is {dir_txt}, but the early stages are
{"" if c["early_memory_bound"] else "not "}bandwidth-bound and the deep stages
{"" if c["deep_compute_bound"] else "not "}compute-bound by this measure. Per kernel,
memory-bound kernels hold {mb["stem"]:.0%} / {mb["layer1"]:.0%} / {mb["layer2"]:.0%} /
{mb["layer3"]:.0%} / {mb["layer4"]:.0%} of the time of stem / layer1 / layer2 / layer3 / layer4.
Elementwise kernels ({_elementwise_ops(inside)}) take {ew_l1:.0%} of layer1's kernel time and
{ew_all:.0%} of the forward's; layer3 alone is {l3.time_share:.0%} of the time
({l3.kernels:.0f} kernels) at {l3.achieved_tflops:.0f} TFLOP/s and
{l3.achieved_occupancy_tw_pct:.0f} % achieved occupancy.

**Wide conv stack.** Of its {len(wb)} blocks (all widths): {wide_bounds}. DRAM throughput falls
from {w0.dram_throughput_tw_pct.mean():.0f} % in the first stage to
{w3.dram_throughput_tw_pct.mean():.0f} % in the last while the tensor pipe rises from
{w0.tensor_pipe_tw_pct.mean():.0f} % to {w3.tensor_pipe_tw_pct.mean():.0f} % (means over blocks
and widths).

**YOLOv8 roofline (fp16 NHWC b8; ceilings {pk:.0f} TFLOP/s and {bw / 1e3:.1f} TB/s:
{ceiling_note()}; ridge {ridge:.0f} FLOP/B).** At
width {mid_w:g}, {int((fl.side == "compute").sum())} of {len(fl)} layers with FLOPs sit on the
compute side of the ridge (memory side: {mem_layers}), yet they reach
{fl.pct_of_roof.min():.0f}-{fl.pct_of_roof.max():.0f} % of their roof: compute-side, not
compute-bound. The zero-FLOP layers ({", ".join(zero.layer + " " + zero.module_type)}) move
{zero.achieved_gbps.min():.0f}-{zero.achieved_gbps.max():.0f} GB/s
({zero.pct_of_peak_gbps.min():.0f}-{zero.pct_of_peak_gbps.max():.0f} % of the copy
ceiling). The whole forward delivers {s0.tflops_forward:.0f} TFLOP/s at width {s0.width:g}
({s0.pct_of_roof_tw:.0f} % of the roof, time-weighted; memory-side layers
{s0.memory_side_time_share:.0%} of the time) and {s1.tflops_forward:.0f} TFLOP/s at width
{s1.width:g} ({s1.pct_of_roof_tw:.0f} % of the roof, time-weighted; memory-side layers
{s1.memory_side_time_share:.0%}). Time-weighted shares of each layer's roof are not the forward's
TFLOP/s over the matmul ceiling ({s0.tflops_forward / pk:.0%} and {s1.tflops_forward / pk:.0%}).

**Activations.** At width {mid_w:g} the largest layer output is
{a.activation_mb.max():.1f} MB per image ({a.loc[a.activation_mb.idxmax(), "label"]}); all layer
outputs together are {a.activation_mb.sum():.0f} MB per image in fp16, against
{a.weight_mb.sum():.0f} MB of weights.

**Layout (width 1.0, fp16, batch 8).** NCHW runs {nchw.kernels:.0f} kernels against
{nhwc.kernels:.0f} for NHWC; {nchw.transform_kernels:.0f} of them
({nchw.transform_launch_share:.0%}) are layout transforms taking
{nchw.transform_time_share:.0%} of NCHW's kernel time; NCHW's kernels take
{nchw.time_vs_nhwc:.2f}x NHWC's time ({nchw.forward_us / 1e3:.2f} vs
{nhwc.forward_us / 1e3:.2f} ms summed).

**Launches.** A forward launches {fusion.launches.min()}-{fusion.launches.max()} kernels (widths
{fusion.width.min():g}-{fusion.width.max():g}); the {f_mid.C2f_layers:.0f} C2f layers launch
{f_mid.C2f_launches:.0f} of them ({f_mid.C2f_launch_share:.0%} at width {f_mid.width:g}). Fusing
each C2f into one kernel would remove
{fusion.removed_share.min():.0%}-{fusion.removed_share.max():.0%} of all launches, so
**claim "fusing YOLOv8's C2f removes over 90 % of kernel launches": {holds11}** (this is the
bound). Removing 90 % would take fusing every layer into a single kernel
({all_lo:.1%}-{all_hi:.1%}).{measured_txt} At batch {cost.attrs.get("batch", "")} a CUDA
graph saves {cost.graph_saves_ms.min():.2f}-{cost.graph_saves_ms.max():.2f} ms per forward,
{cost.saved_us_per_launch.min():.1f}-{cost.saved_us_per_launch.max():.1f} us per launch
({cost.saved_us_per_launch.iloc[0]:.1f} at width {cost.width.iloc[0]:g},
{cost.saved_us_per_launch.iloc[-1]:.1f} at width {cost.width.iloc[-1]:g}: where kernels run
longer, the GPU hides part of the launches and the saving per launch is a lower bound of their
host cost, while eager takes {cost.eager.min():.2f}-{cost.eager.max():.2f} ms at every width,
{per_kernel_lo:.0f}-{per_kernel_hi:.0f} us per kernel); at
batch {cost8.attrs.get("batch", "")} the GPU runs no kernel for
{cost8.gpu_idle_share_eager.max():.0%} of an eager forward at width {cost8.width[idle_hi]:g} and
{cost8.gpu_idle_share_eager.min():.0%} at width {cost8.width[idle_lo]:g} (kernel time from the
trace against the eager median).
"""

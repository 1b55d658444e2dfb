"""roofline_plots: split from analyse.roofline."""

from __future__ import annotations

from yolo_sm.analyse.roofline import (
    BOUNDS,
    HIGH_PCT,
    OCC_CUT,
    default_peaks,
    low_occupancy_is_busiest,
    occupancy_sides,
)
from yolo_sm.contract.hardware import PEAK_FP16_TFLOPS, peak_copy_gbps, peak_fp16_tflops
from yolo_sm.report.colors import KERNEL_CLASS_COLORS, TEMPLATE
from yolo_sm.report.colors import color_map as _color_map

REFERENCE_NOTE = (
    "reference ceilings of this machine kind from the project brief (dense fp16 matmul, "
    "device-to-device copy), not measured by yolo_sm"
)


def ceiling_source(peak_tflops: float, peak_gbps: float) -> str:
    """A few words for a legend: whether ``peak_tflops`` / ``peak_gbps`` are yolo_sm's own
    measured ceilings, the brief's reference figures, or the user's."""

    if (peak_tflops, peak_gbps) == default_peaks():
        measured = ceiling_note() != REFERENCE_NOTE
        return "measured by yolo_sm" if measured else "reference, not measured"
    if peak_tflops == PEAK_FP16_TFLOPS:
        return "reference, not measured"
    return "set by the user"


def ceiling_note() -> str:
    """Where the default ceilings come from (measured by yolo_sm, or the brief's figures)."""

    (_, a), (_, b) = peak_fp16_tflops(), peak_copy_gbps()
    if "measured" in a and "measured" in b:
        return "ceilings measured by yolo_sm on this GPU (h200/ceilings)"
    return REFERENCE_NOTE


BOUND_COLORS = dict(zip(BOUNDS, ("#1F77B4", "#D62728", "#7F7F7F"), strict=True))


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


def pcts(rows, col, fmt=".0f") -> str:
    """'12 / 34 / 56': a column's values joined (a missing one as '-')."""
    import pandas as pd

    return " / ".join("-" if pd.isna(v) else f"{v:{fmt}}" for v in rows[col])


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
        f", {pcts(lo, 'one_block_time_share', '.0%')} of their time at one resident block per SM"
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
        f"{pcts(g, 'time_share', '.0%')} at width {w:g}" for w, g in st.groupby("width")
    )
    tops = st.loc[st.groupby("width").low_occupancy_time_share.idxmax()]
    if tops.stage.nunique() == 1:
        top = (
            f"the {tops.stage.iloc[0]} has the largest share of its own time under the cut at "
            f"every width ({pcts(tops, 'low_occupancy_time_share', '.0%')})"
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
  {pcts(lo, "time_share", ".0%")} of the forward's kernel time ({pcts(lo, "kernels", "d")} of
  {pcts(totals, "kernels", "d")} kernels): {classes} at {occ} theoretical occupancy{one}.
  {stage_txt}
- **Tensor pipes.** Time-weighted, the kernels under the cut keep the tensor pipes
  {pcts(lo, "tensor_pipe_tw_pct")} % busy against {pcts(hi, "tensor_pipe_tw_pct")} % for the
  rest: higher {where("tensor_pipe_tw_pct")}.
- **SM throughput.** Under the cut {pcts(lo, "sm_throughput_tw_pct")} % of peak against
  {pcts(hi, "sm_throughput_tw_pct")} % for the rest: higher {where("sm_throughput_tw_pct")}.
  {dram} ({pcts(lo, "dram_throughput_tw_pct")} % under the cut against
  {pcts(hi, "dram_throughput_tw_pct")} %). By the {high:g} % rule the kernels under the cut are,
  on their time-weighted averages, {bounds}.
- **From width {first.width:g} to {last.width:g}** the share of time under the cut goes from
  {first.time_share:.0%} to {last.time_share:.0%}, their tensor pipe from
  {first.tensor_pipe_tw_pct:.0f} % to {last.tensor_pipe_tw_pct:.0f} % and their SM throughput from
  {first.sm_throughput_tw_pct:.0f} % to {last.sm_throughput_tw_pct:.0f} %. {verdict}
"""


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

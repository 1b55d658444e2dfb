"""scaling_plots: split from analyse.scaling."""

from __future__ import annotations

from yolo_sm.analyse.scaling import (
    COMPILE_VARIANTS,
    PRECISION_ORDER,
    _ok,
    measurement_runs,
    speed_vs_occupancy,
)
from yolo_sm.contract.vocab import TOLERANCE, Precision
from yolo_sm.report.colors import COLORS, TEMPLATE
from yolo_sm.report.colors import color_map as _color_map
from yolo_sm.report.fast_plots import plot_speedup_vs_width


def plot_width_lines(table, *, y="img_per_s", log_y=True, title=None, y_title=None):
    """``y`` against width, one line per batch, one panel per backend (hover: latency, TFLOP/s)."""
    import plotly.express as px

    d = table.sort_values(["batch", "width"]).assign(batch=lambda x: x.batch.astype(str))
    hover = [c for c in ("median_ms", "iqr_ms", "tflops", "peak_frac", "img_per_s") if c in d]
    fig = px.line(
        d,
        x="width",
        y=y,
        color="batch",
        facet_col="backend",
        markers=True,
        log_y=log_y,
        hover_data=hover,
        template=TEMPLATE,
        title=title or f"{y} vs width",
        color_discrete_sequence=px.colors.sequential.Viridis,
    )
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_xaxes(title_text="width multiplier")
    fig.update_yaxes(title_text=y_title or y, col=1)
    if y == "peak_frac":
        fig.update_yaxes(tickformat=".0%")
    return fig


def plot_width_occupancy(occ, *, title=None):
    """Time-weighted achieved and theoretical occupancy, SM coverage and tensor-core time share
    against width (all in %)."""
    import plotly.graph_objects as go

    occ = occ.sort_values("width")
    fig = go.Figure()
    series = (
        ("theoretical_occupancy_tw_pct", 1, "theoretical occupancy", "#1F77B4", "dot"),
        ("achieved_occupancy_tw_pct", 1, "achieved occupancy", "#1F77B4", "solid"),
        ("sm_coverage_tw", 100, "SM coverage (block slots filled)", "#2CA02C", "solid"),
        ("tensor_core_time_share", 100, "tensor-core share of kernel time", "#D62728", "solid"),
    )
    for col, scale, name, color, dash in series:
        fig.add_scatter(
            x=occ.width,
            y=occ[col] * scale,
            name=name,
            mode="lines+markers",
            line={"color": color, "dash": dash},
            hovertemplate=f"width %{{x}}<br>{name}: %{{y:.1f}} %<extra></extra>",
        )
    fig.update_layout(
        template=TEMPLATE,
        title=title or "Occupancy per width, time-weighted over one forward (Nsight Compute)",
        xaxis_title="width multiplier",
        yaxis_title="%",
        yaxis_range=[0, 105],
    )
    return fig


def plot_class_occupancy(cls, *, title=None):
    """Per kernel class against width: share of kernel time and time-weighted theoretical and
    achieved occupancy (three panels)."""
    import plotly.express as px

    d = cls.assign(time_share_pct=cls.time_share * 100).melt(
        id_vars=["width", "kernel_class", "kernels", "time_us"],
        value_vars=[
            "time_share_pct",
            "theoretical_occupancy_tw_pct",
            "achieved_occupancy_tw_pct",
        ],
        var_name="metric",
        value_name="pct",
    )
    names = {
        "time_share_pct": "share of kernel time (%)",
        "theoretical_occupancy_tw_pct": "theoretical occupancy (%)",
        "achieved_occupancy_tw_pct": "achieved occupancy (%)",
    }
    d["metric"] = d.metric.map(names)
    fig = px.line(
        d.sort_values("width"),
        x="width",
        y="pct",
        color="kernel_class",
        facet_col="metric",
        markers=True,
        hover_data=["kernels", "time_us"],
        template=TEMPLATE,
        color_discrete_map=_color_map(d.kernel_class.unique()),
        title=title or "Per kernel class: time share and occupancy vs width",
    )
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(range=[0, 105])
    fig.update_yaxes(title_text="%", col=1)
    fig.update_xaxes(title_text="width")
    return fig


def plot_wide_stack(tab, *, title=None):
    """Per kernel family of the wide conv stack against width: theoretical and achieved
    occupancy and tensor-pipe use (three panels); hover names the limiter."""
    import plotly.express as px

    d = tab.melt(
        id_vars=["width", "kernel_family", "limiter", "kernels", "time_us", "time_share"],
        value_vars=[
            "theoretical_occupancy_tw_pct",
            "achieved_occupancy_tw_pct",
            "tensor_pipe_tw_pct",
        ],
        var_name="metric",
        value_name="pct",
    )
    d["metric"] = d.metric.map(
        {
            "theoretical_occupancy_tw_pct": "theoretical occupancy (%)",
            "achieved_occupancy_tw_pct": "achieved occupancy (%)",
            "tensor_pipe_tw_pct": "tensor pipe busy (%)",
        }
    )
    fig = px.line(
        d.sort_values("width"),
        x="width",
        y="pct",
        color="kernel_family",
        facet_col="metric",
        markers=True,
        hover_data=["limiter", "kernels", "time_us", "time_share"],
        template=TEMPLATE,
        title=title or "Wide conv stack: occupancy and tensor-pipe use per kernel family",
    )
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(range=[0, 105])
    fig.update_yaxes(title_text="%", col=1)
    fig.update_xaxes(title_text="width factor")
    fig.update_layout(legend={"orientation": "h", "y": -0.25}, height=520)
    return fig


def _pct(x) -> str:
    return f"{x:.0f} %"


def width_findings(
    table, occ, cls, wide, flops, *, peak_tflops: float, batch: int = 8, backend="cudagraph"
) -> str:
    """The findings of notebook 01 as markdown, every number computed from the tables."""
    sv = speed_vs_occupancy(table, occ, batch=batch, backend=backend)
    lo, hi = sv.iloc[0], sv.iloc[-1]
    f = flops.set_index("width").gflops_per_img
    flop_ratio = f[hi.width] / f[lo.width]
    best = table.loc[table.tflops.idxmax()]
    big = table[table.batch == table.batch.max()]
    big_e = big[big.backend == "eager"].set_index("width")
    b1 = table[table.batch == 1].pivot_table(index="width", columns="backend", values="img_per_s")
    b1_gain = (b1["cudagraph"] / b1["eager"]) if {"cudagraph", "eager"} <= set(b1) else None
    th, ac = occ.theoretical_occupancy_tw_pct, occ.achieved_occupancy_tw_pct
    tc = cls[cls.kernel_class == "tensor_core_conv"]
    ew = cls[cls.kernel_class == "elementwise"]
    main = wide[wide.kernel_class == "tensor_core_conv"]
    main = main.loc[main.groupby("width").time_us.idxmax()].sort_values("width")
    m0, m1 = main.iloc[0], main.iloc[-1]
    regs_block = int(m1.registers_per_thread * m1.block_size)
    lines = [
        f"**Findings (H200, widths {lo.width:g}-{hi.width:g}, fp16 NHWC).**",
        "",
        f"- **Wider is slower per image, but not because the GPU is used worse.** At batch "
        f"{batch} ({backend}, no launch overhead), width {lo.width:g} -> {hi.width:g} goes "
        f"{lo.img_per_s:,.0f} -> "
        f"{hi.img_per_s:,.0f} img/s ({hi.img_per_s / lo.img_per_s:.2f}x) while FLOPs per image "
        f"grow {flop_ratio:.1f}x: delivered TFLOP/s rise {lo.tflops:.0f} -> {hi.tflops:.0f} "
        f"({lo.peak_frac:.0%} -> {hi.peak_frac:.0%} of the {peak_tflops:.0f} TFLOP/s fp16 "
        f"ceiling). The best point of the sweep is width {best.width:g}, batch "
        f"{best.batch:.0f}, {best.backend}: {best.tflops:.0f} TFLOP/s ({best.peak_frac:.0%}). "
        f"At batch {big.batch.max():.0f} eager the widest model runs "
        f"{big_e.tflops.max():.0f} TFLOP/s and the narrowest {big_e.tflops.min():.0f}.",
        f"- **Occupancy barely moves with width.** Time-weighted achieved occupancy per forward "
        f"(batch {batch}) stays within {ac.min():.0f}-{ac.max():.0f} % for every width; "
        f"theoretical occupancy drifts {th.iloc[0]:.0f} % -> {th.iloc[-1]:.0f} %. The drift is "
        f"the kernel mix, not the kernels: tensor-core convolutions run at "
        f"{tc.theoretical_occupancy_tw_pct.min():.0f}-{tc.theoretical_occupancy_tw_pct.max():.0f}"
        f" % theoretical at every width and their share of the time (convolutions only; the "
        f"table's tensor-core share also counts GEMMs) grows "
        f"{tc.time_share.iloc[0]:.0%} -> {tc.time_share.iloc[-1]:.0%}, while elementwise "
        f"kernels (100 % theoretical) shrink {ew.time_share.iloc[0]:.0%} -> "
        f"{ew.time_share.iloc[-1]:.0%}. SM coverage rises "
        f"{occ.sm_coverage_tw.iloc[0]:.0%} -> {occ.sm_coverage_tw.iloc[-1]:.0%}: wider layers "
        "have more blocks to spread over the SMs.",
        "- **'Wider -> lower occupancy -> slower' does not hold here.** Throughput falls with "
        "width because the work grows, and the work is done faster (TFLOP/s up) at the same "
        "occupancy.",
        f"- **Wide conv stack ({m0.width:g}x -> {m1.width:g}x): the block does not get wider.** "
        f"The convolution that takes the most time keeps one launch shape at every width: "
        f"{m1.block_size:.0f} threads, {m1.registers_per_thread:.0f} registers per thread "
        f"({regs_block:,} of the 65,536 registers of an SM), "
        f"{m1.shared_mem_per_block_bytes / 1024:.0f} KiB of shared memory per block. Registers "
        f"allow {m1.limit_registers:.0f} block per SM, shared memory {m1.limit_shared_mem:.0f}, "
        f"warps {m1.limit_warps:.0f}: limiter {m1.limiter}, so theoretical occupancy is "
        f"{m1.theoretical_occupancy_tw_pct:.2f} % (achieved {m0.achieved_occupancy_tw_pct:.1f} -> "
        f"{m1.achieved_occupancy_tw_pct:.1f} %) whatever the width. Its grid is "
        f"{main.grid_min.min():.0f}-{main.grid_max.max():.0f} blocks (at most "
        f"{main.waves_max.max():.2f} wave): a persistent kernel that loops over tiles, so "
        f"more channels mean more loop trips, not more or bigger blocks. What does change is the "
        f"tensor pipe: {m0.tensor_pipe_tw_pct:.0f} % -> {m1.tensor_pipe_tw_pct:.0f} % busy. Low "
        f"occupancy is the kernel's design (few warps, big tiles held in registers and shared "
        f"memory feeding the tensor cores), not a penalty for width.",
    ]
    if b1_gain is not None:
        lines.append(
            f"- **Batch 1 is launch-bound.** Eager batch 1 gives "
            f"{b1['eager'].min():,.0f}-{b1['eager'].max():,.0f} img/s whatever the width; one "
            f"CUDA graph replay gives {b1_gain.min():.1f}-{b1_gain.max():.1f}x that."
        )
    return "\n".join(lines)


def plot_precision_speedup(ratios, *, baseline: str = "fp32", title=None):
    """Same-run speed-up over ``baseline`` against batch, one line per precision, panels width
    x backend; the dotted line is 1 (as fast as the baseline)."""
    import plotly.express as px

    d = ratios.sort_values(["precision", "batch"])
    fig = px.line(
        d,
        x="batch",
        y="ratio",
        color="precision",
        facet_col="width",
        facet_row="backend",
        markers=True,
        log_x=True,
        log_y=True,
        hover_data=["layout", "width", "batch"],
        category_orders={"precision": list(PRECISION_ORDER)},
        color_discrete_map=_color_map(d.precision.unique()),
        template=TEMPLATE,
        title=title
        or f"Speed-up over {baseline} measured in the same run (latency {baseline} / latency x)",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.for_each_annotation(lambda a: a.update(text=a.text.replace("=", " ")))
    fig.update_yaxes(title_text="")
    fig.update_yaxes(title_text=f"speed-up over {baseline}", col=1)
    fig.update_xaxes(tickvals=sorted(d.batch.unique()))
    fig.update_layout(height=560)
    return fig


def plot_precision_forward(fwd, *, title=None):
    """Two panels per config: GPU kernel time per forward (ms) and time-weighted theoretical /
    achieved occupancy (%)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("GPU kernel time per forward (ms)", "time-weighted occupancy (%)"),
    )
    labels = fwd.precision + " " + fwd.layout.str.upper()
    fig.add_bar(
        x=labels,
        y=fwd.time_ms,
        marker_color=[COLORS.get(p, "#7F7F7F") for p in fwd.precision],
        name="time per forward",
        hovertemplate="%{x}: %{y:.2f} ms<extra></extra>",
        row=1,
        col=1,
    )
    for col, name, op in (
        ("theoretical_occupancy_tw_pct", "theoretical", 0.45),
        ("achieved_occupancy_tw_pct", "achieved", 1.0),
    ):
        fig.add_bar(
            x=labels,
            y=fwd[col],
            name=f"{name} occupancy",
            opacity=op,
            marker_color="#1F77B4",
            hovertemplate=f"%{{x}}: {name} %{{y:.1f}} %<extra></extra>",
            row=1,
            col=2,
        )
    fig.update_layout(
        template=TEMPLATE,
        barmode="group",
        title=title or "Per precision and layout, width 1.0 batch 8 (Nsight Compute)",
    )
    return fig


def plot_rel_err(*sweeps, title=None):
    """Every sweep point's ``rel_err`` per precision (log scale, points offset by layout),
    with each precision's tolerance as a dash."""
    import pandas as pd
    import plotly.express as px

    d = pd.concat([_ok(s) for s in sweeps], ignore_index=True)
    d = d[d.rel_err > 0]  # fp32 against itself is exactly 0: not on a log axis
    fig = px.strip(
        d,
        x="precision",
        y="rel_err",
        color="layout",
        hover_data=["width", "batch", "backend"],
        category_orders={"precision": [p for p in PRECISION_ORDER if p in set(d.precision)]},
        color_discrete_map=_color_map(d.layout.unique()),
        log_y=True,
        template=TEMPLATE,
        title=title or "Relative L2 error vs eager fp32 on the GPU, per sweep point",
    )
    for p in d.precision.unique():
        fig.add_scatter(
            x=[p],
            y=[TOLERANCE[Precision(p)]],
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 40, "color": "black"},
            name="tolerance",
            showlegend=bool(p == d.precision.unique()[0]),
            hovertemplate=f"{p} tolerance %{{y:g}}<extra></extra>",
        )
    fig.update_yaxes(title_text="relative L2 error (log)")
    return fig


def precision_findings(speedup, missing, fwd, matmul, errors, cpu_errors=None) -> str:
    """The findings of notebook 02 as markdown, every number computed from the tables."""
    lines = ["**Findings (H200).**", ""]
    sp = speedup.copy()
    kernels = (
        {(r.precision, r.layout): r.kernels for r in fwd.itertuples()}
        if {"precision", "layout", "kernels"} <= set(fwd.columns)
        else {}
    )
    for prec in [p for p in PRECISION_ORDER if p in set(sp.precision)]:
        s = sp[sp.precision == prec]
        lo_b, hi_b = s.batch.min(), s.batch.max()

        def rng(backend, b, s=s):
            r = s[(s.backend == backend) & (s.batch == b)].ratio
            return f"{r.min():.1f}-{r.max():.1f}x" if len(r) else "n/a"

        k = kernels.get((prec, "nchw")), kernels.get(("fp32", "nchw"))
        launches = (
            f"; Nsight Compute counts {k[0]:.0f} kernels per NCHW {prec} forward against "
            f"fp32's {k[1]:.0f} (width 1.0 batch 8), and at this batch every launch costs host "
            "time"
            if None not in k and k[0] != k[1]
            else ""
        )
        lines.append(
            f"- **{prec} over fp32 (same run, NCHW, widths {s.width.min():g}-"
            f"{s.width.max():g}).** CUDA graph: batch {lo_b:.0f} {rng('cudagraph', lo_b)}, "
            f"batch {hi_b:.0f} {rng('cudagraph', hi_b)} faster; eager batch {hi_b:.0f} "
            f"{rng('eager', hi_b)}, eager batch {lo_b:.0f} {rng('eager', lo_b)} (eager batch "
            f"{lo_b:.0f} is bound by kernel launches on the CPU, so a faster kernel barely shows"
            f"{launches})."
        )
    if "minutes_apart" in sp and (sp.minutes_apart > 10).any():
        far = sp[sp.minutes_apart > 10]
        lines.append(
            f"- **{len(far)} of {len(sp)} ratios pair points measured more than 10 minutes "
            f"apart** (up to {far.minutes_apart.max():.0f}), i.e. in two device calls of a "
            "resumed sweep, not side by side: "
            + ", ".join(
                f"{r.precision} w{r.width:g} {r.backend} b{r.batch:.0f}"
                for r in far.head(8).itertuples()
            )
            + (" ..." if len(far) > 8 else "")
            + "."
        )
    if len(missing):
        planned = int(missing.planned.iloc[0])
        n = int(missing.points.sum())
        parts = "; ".join(
            f"`{step}` {int(g.points.sum())} (widths {g.widths.iloc[0]}, batch {g.batches.iloc[0]})"
            if g.widths.nunique() == 1 and g.batches.nunique() == 1
            else f"`{step}` {int(g.points.sum())}"
            for step, g in missing.groupby("step", sort=False)
        )
        lines.append(
            f"- **Still missing from the sweeps:** {n} of {planned} planned points, per plan "
            f"step: {parts} (table above). Re-running those steps measures them; the ratios "
            f"above cover only the widths and batches where both fp32 and the other precision "
            f"exist."
        )
    f = fwd.set_index(fwd.precision + "_" + fwd.layout)
    if {"fp32_nchw", "fp16_nhwc"} <= set(f.index):
        a, b = f.loc["fp32_nchw"], f.loc["fp16_nhwc"]
        simt = matmul[(matmul.precision == "fp32") & (matmul.kernel_class == "simt_conv")]
        tc = matmul[
            (matmul.precision == "fp16")
            & (matmul.layout == "nhwc")
            & (matmul.kernel_class == "tensor_core_conv")
        ]
        lines.append(
            f"- **Kernels (width 1.0, batch 8).** fp32 NCHW spends {a.simt_share:.0%} of its "
            f"{a.time_ms:.1f} ms of kernel time in SIMT (FFMA) convolutions at "
            f"{simt.registers_per_thread_tw.max():.0f} registers per thread and "
            f"{simt.theoretical_occupancy_tw_pct.min():.0f}-"
            f"{simt.theoretical_occupancy_tw_pct.max():.0f} % theoretical occupancy; fp16 NHWC "
            f"runs its convolutions on tensor cores ({b.tensor_core_share:.0%} of "
            f"{b.time_ms:.1f} ms, {a.time_ms / b.time_ms:.1f}x less kernel time) at "
            f"{tc.registers_per_thread_tw.iloc[0]:.0f} registers, "
            f"{tc.shared_mem_per_block_kib_tw.iloc[0]:.0f} KiB shared memory per block and "
            f"{tc.theoretical_occupancy_tw_pct.iloc[0]:.0f} % theoretical occupancy. Time-weighted"
            f" achieved occupancy over the forward rises {a.achieved_occupancy_tw_pct:.0f} % -> "
            f"{b.achieved_occupancy_tw_pct:.0f} %, although the convolutions themselves stay "
            f"at low occupancy: the tensor-core convolutions finish so fast that kernels with "
            f"at least 75 % theoretical occupancy (elementwise, copies, pooling) grow from "
            f"{a.high_occupancy_share:.0%} to {b.high_occupancy_share:.0%} of the time."
        )
    lt = fwd[fwd.layout_transform_share > 0]
    if len(lt):
        parts = ", ".join(
            f"{r.precision} {r.layout.upper()} {r.layout_transform_share:.0%} "
            f"({r.layout_transform_kernels} kernels)"
            for r in lt.itertuples()
        )
        lines.append(
            f"- **Layout transforms** (NCHW <-> NHWC) take a share of kernel time in: {parts}. "
            f"Tensor-core kernels want channels-last; the SIMT fp32 kernels want NCHW, so each "
            f"mismatch pays for conversions around the convolutions."
        )
    e = errors[errors.precision != "fp32"]
    if len(e):
        parts = "; ".join(
            f"{r.precision} {r.layout.upper()} median {r.median:.1e}, max {r.max:.1e} "
            f"(tolerance {r.tolerance:g}, {r.headroom:.0f}x headroom)"
            for r in e.itertuples()
        )
        lines.append(
            f"- **Numerical error on the GPU** (relative L2 of the head output against eager "
            f"fp32, BN-calibrated models): {parts}. Every point is within its tolerance."
            if (e["max"] <= e.tolerance).all()
            else f"- **Numerical error on the GPU:** {parts}. Some points exceed tolerance."
        )
    if cpu_errors is not None and len(cpu_errors):
        c = cpu_errors.groupby("precision").rel_err.median()
        gpu = errors.groupby("precision")["median"].median()
        parts = ", ".join(
            f"{p} {v:.1e}" + (f" (GPU median {gpu[p]:.1e})" if p in gpu and gpu[p] > 0 else "")
            for p, v in c.items()
        )
        lines.append(
            "- **The same error measured here on the CPU** (small model at low resolution, "
            f"fresh inputs): {parts}."
        )
    return "\n".join(lines)


def pair_findings(ratios, baseline: str) -> str:
    """One line per precision of ``ratios`` (:func:`precision_speedup` against ``baseline``):
    its same-run speed-up per backend at the smallest and largest batch, and the median."""
    lines = []
    for prec, s in ratios.groupby("precision", sort=False):
        parts = []
        for backend, g in s.groupby("backend"):
            lo, hi = g[g.batch == g.batch.min()].ratio, g[g.batch == g.batch.max()].ratio
            parts.append(
                f"{backend} batch {g.batch.min():.0f} {lo.min():.2f}-{lo.max():.2f}x, batch "
                f"{g.batch.max():.0f} {hi.min():.2f}-{hi.max():.2f}x"
            )
        layouts = "/".join(sorted(set(s.layout))).upper()
        lines.append(
            f"- **{prec} over {baseline}** ({layouts}, same run, widths {s.width.min():g}-"
            f"{s.width.max():g}): " + "; ".join(parts) + f"; median {s.ratio.median():.2f}x "
            f"over {len(s)} points ({(s.ratio > 1).mean():.0%} of them above 1)."
        )
    return "\n".join(lines) if lines else f"No point has both {baseline} and another precision."


def layer_delta_findings(delta, ratios, a: str = "bf16", b: str = "fp16") -> str:
    """Markdown: where ``a`` loses or gains time against ``b`` in one forward
    (:func:`precision_layer_delta`) and how the same-run img/s ratio (:func:`precision_speedup`
    against ``b``) moves with width for CUDA graphs from batch 16 (compute-bound, no launch
    noise)."""
    if delta.empty:
        return f"- No Nsight Compute forward has both {a} and {b}."
    ta, tb = delta[f"{a}_us"].sum(), delta[f"{b}_us"].sum()
    top = delta.iloc[0]
    cls_changed = delta[delta[f"classes_{a}"] != delta[f"classes_{b}"]]
    swaps = ", ".join(
        f"`{r.layer}` ({r[f'classes_{b}']} in {b}, {r[f'classes_{a}']} in {a}: "
        f"{r[f'{b}_us']:.0f} -> {r[f'{a}_us']:.0f} us)"
        for _, r in cls_changed.iterrows()
    )
    lines = [
        f"- **Where the time differs (Nsight Compute, one forward):** {a} {ta / 1e3:.2f} ms "
        f"against {b} {tb / 1e3:.2f} ms of kernel time ({ta / tb - 1:+.1%}); the largest "
        f"difference per layer is `{top.layer}`, {top.delta_us:+.0f} us "
        f"({top.delta_us / (ta - tb):.0%} of the whole difference)"
        + (f". Layers whose kernel class changes: {swaps}." if swaps else ".")
    ]
    r = ratios[(ratios.precision == a) & (ratios.backend == "cudagraph") & (ratios.batch >= 16)]
    if len(r):
        by_w = r.groupby("width").ratio.median()
        lines.append(
            "- **By width (CUDA graph, batch >= 16, median over batches):** "
            + ", ".join(f"w{w:g} {v:.2f}x" for w, v in by_w.items())
            + ". The kernel comparison above is one width only; what sets the ratio at the "
            "other widths is not in these tables (an Nsight Compute forward of both precisions "
            "at those widths would say)."
        )
    return "\n".join(lines)


def plot_presets(table, *, batch: int = 64, title=None):
    """img/s against GFLOPs per image at one batch: one line per family (n -> x), one panel
    per precision and backend; points without figures (failed checks) are left out."""
    import plotly.express as px

    d = table[(table.batch == batch) & (table.status == "ok")]
    fig = px.line(
        d,
        x="gflops_per_img",
        y="img_per_s",
        color="family",
        text="scale",
        facet_col="backend",
        facet_row="precision",
        markers=True,
        log_x=True,
        log_y=True,
        hover_data=["width", "depth", "median_ms", "tflops", "peak_frac"],
        template=TEMPLATE,
        title=title or f"Standard presets, batch {batch}: img/s vs GFLOPs per image",
    )
    fig.update_traces(textposition="top center")
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_xaxes(title_text="GFLOPs per image")
    return fig


def presets_findings(table) -> str:
    """What the presets table shows and what it lacks, from its rows."""
    ok = table[table.status == "ok"]
    lines = []
    for (fam, prec, backend), g in ok[ok.batch == ok.batch.max()].groupby(
        ["family", "precision", "backend"]
    ):
        g = g.sort_values("gflops_per_img")
        if len(g) >= 2:
            a, b = g.iloc[0], g.iloc[-1]
            lines.append(
                f"- **{fam} {prec} {backend}, batch {int(a.batch)}:** {a.scale} -> {b.scale} "
                f"costs {b.gflops_per_img / a.gflops_per_img:.1f}x the FLOPs per image and runs "
                f"{a.img_per_s / b.img_per_s:.1f}x fewer img/s ({a.tflops:.0f} -> "
                f"{b.tflops:.0f} TFLOP/s)."
            )
    inversions, eager_small = [], 0
    for (fam, prec, backend, b), g in ok.groupby(["family", "precision", "backend", "batch"]):
        g = g.sort_values("gflops_per_img")
        faster = g.img_per_s.diff() > 0  # a costlier preset measured faster than the one before
        for i in g.index[faster.to_numpy()]:
            prev = g.loc[:i].iloc[-2]
            inversions.append(
                f"{fam} {prec} {backend} batch {b:g}: {g.loc[i, 'scale']} "
                f"{g.loc[i, 'img_per_s']:,.0f} img/s > {prev.scale} {prev.img_per_s:,.0f}"
            )
            eager_small += backend == "eager" and b <= 8
    if inversions:
        lines.append(
            f"- **{len(inversions)} point(s) run faster than a preset with fewer FLOPs** "
            f"({'; '.join(inversions)}); {eager_small} of them are eager at batch 8 or less, "
            "where the host's launches set the pace and a point carries the host's noise; the "
            "kernel mix also differs between presets (depth, channel caps)."
        )
    if "prov_date_utc" in table:
        runs, first, last = measurement_runs(ok.prov_date_utc)
        if runs > 1:
            lines.append(
                f"- **Measured in {runs} runs** ({first} to {last}, gaps over 10 minutes): "
                "points of different runs are not side by side, and small-batch eager points "
                "move most between runs."
            )
    bad = table[table.status != "ok"]
    if len(bad):
        kinds = bad.groupby(["family", "precision"]).scale.apply(
            lambda s: "/".join(sorted(set(s), key="nsmlx".index))
        )
        what = "; ".join(f"{f} {p}: {s}" for (f, p), s in kinds.items())
        lines.append(
            f"- **{len(bad)} point(s) without figures** ({what}); the reason is in `message`."
        )
    return "\n".join(lines) if lines else "No preset point has figures yet."


def compile_findings(tab, sweep=None) -> str:
    """What :func:`compile_by_width` shows, computed from it: per batch, the range of each
    variant's speed-up across widths; at the largest batch, how the default-mode gain moves from
    the narrowest to the widest model; and whether a CUDA graph alone explains it. With
    ``sweep`` (an fp16 NHWC width sweep from another run): how far the bench's eager baselines
    are from the sweep's, per batch both hold."""
    variants = [c for c in COMPILE_VARIANTS.values() if c in tab and tab[c].notna().any()]
    if tab.empty or not variants:
        return "No torch.compile rows in the bench yet."
    drift = ""
    if sweep is not None:
        e = _ok(sweep)
        e = e[(e.backend == "eager") & (e.precision == "fp16") & (e.layout == "nhwc")]
        j = tab.merge(e[["width", "batch", "img_per_s"]], on=["width", "batch"])
        if len(j):
            ratio = j.eager_img_per_s / j.img_per_s
            r = ratio.groupby(j.batch)
            moved = bool(((ratio - 1).abs() > 0.1).any())
            drift = (
                "\n- **Baselines "
                + ("move between runs" if moved else "agree between runs within 10 %")
                + ".** The bench's eager img/s over the width sweep's (another run) for the same "
                "model and batch: "
                + "; ".join(f"batch {b:g} {g.min():.2f}-{g.max():.2f}x" for b, g in r)
                + (
                    ". Small-batch eager is launch-bound and follows the host of the day, so "
                    "compare speed-ups only within one unit, whose variants ran in one process."
                    if moved
                    else "."
                )
            )
    lines = []
    for b, g in tab.groupby("batch"):
        parts = []
        for v in variants:
            s = g.dropna(subset=[v])
            if len(s):
                lo, hi = s.loc[s[v].idxmin()], s.loc[s[v].idxmax()]
                parts.append(f"{v} {lo[v]:.2f}x (w{lo.width:g}) to {hi[v]:.2f}x (w{hi.width:g})")
        if parts:
            lines.append(f"- **Batch {int(b)}** (over eager, same unit): " + "; ".join(parts) + ".")
    big = tab[tab.batch == tab.batch.max()]
    if {"compile", "CUDA graph"} <= set(big.columns):
        g = big.dropna(subset=["compile", "CUDA graph"]).sort_values("width")
        if len(g) >= 2:
            a, z, top = g.iloc[0], g.iloc[-1], g.loc[g.compile.idxmax()]
            trend = "falls" if z.compile < a.compile else "does not fall"
            peak = (
                f" (highest {top.compile:.2f}x at w{top.width:g})"
                if top.width not in (a.width, z.width)
                else ""
            )
            lines.append(
                f"- At batch {int(a.batch)} the default-mode gain {trend} with width: "
                f"{a.compile:.2f}x at w{a.width:g}, {z.compile:.2f}x at w{z.width:g}{peak}. "
                f"A CUDA graph of the eager kernels gives {g['CUDA graph'].min():.2f}-"
                f"{g['CUDA graph'].max():.2f}x there"
                + (
                    ", below compile everywhere, so launch cost is not where compile's gain comes "
                    "from at this batch: it is the kernels inductor fuses (notebook 08 splits one "
                    "forward's time into convolutions and the rest)."
                    if (g["CUDA graph"] < g.compile).all()
                    else ", not below compile at every width: part of compile's gain there may be "
                    "launch cost."
                )
            )
    small = tab[tab.batch == tab.batch.min()]
    if {"compile", "CUDA graph"} <= set(small.columns):
        g = small.dropna(subset=["compile", "CUDA graph"])
        if len(g):
            lines.append(
                f"- At batch {int(g.batch.iloc[0])} a CUDA graph alone gives "
                f"{g['CUDA graph'].min():.2f}-{g['CUDA graph'].max():.2f}x and compile's default "
                f"mode {g.compile.min():.2f}-{g.compile.max():.2f}x: "
                + (
                    "removing launches pays more than fusing kernels (the forward is launch-bound)"
                    if g["CUDA graph"].median() > g.compile.median()
                    else "fusing kernels pays more than removing launches"
                )
                + (
                    f"; reduce-overhead, which does both, gives "
                    f"{g['compile reduce-overhead'].min():.2f}-"
                    f"{g['compile reduce-overhead'].max():.2f}x."
                    if "compile reduce-overhead" in g and g["compile reduce-overhead"].notna().any()
                    else "."
                )
            )
    return "\n".join(lines) + drift


def plot_compile_by_width(bench, title=None):
    """The bench's CUDA graph and torch.compile rows over eager against width, one panel per
    batch (:func:`yolo_sm.analyse.fast.plot_speedup_vs_width` on those variants)."""

    return plot_speedup_vs_width(
        bench[bench.variant.isin(list(COMPILE_VARIANTS))],
        title=title or "torch.compile and CUDA graph over eager fp16 NHWC (same unit) vs width",
    )


def fp8_error_findings(tab, tolerance: float | None = None) -> str:
    """What :func:`fp8_error_table` shows, computed from it."""
    if tolerance is None:
        tolerance = TOLERANCE[Precision.FP8]
    t = tab.sort_values("width").set_index("width")
    lines = []
    if "fp8" in t:
        lines.append(
            "- **As built** (class logits almost all constant bias): fp8 adds "
            + ", ".join(f"{v:.2%} at width {w:g}" for w, v in t["fp8"].items())
            + " of relative L2 error to the raw head output"
            + (f" (fp16 {t['fp16'].min():.3%}-{t['fp16'].max():.3%})." if "fp16" in t else ".")
        )
    prior = "fp8, class prior"
    if prior in t:
        lines.append(
            "- **With the bench's class prior** (class logits spread like a trained model's): "
            + ", ".join(f"{v:.1%} at width {w:g}" for w, v in t[prior].items())
            + f"; the fp8 tolerance is {tolerance:.0%}. The prior makes the class logits carry "
            "signal instead of a constant, so their rounding shows."
        )
        gpu, gpu_lo = "fp8 H200 (class prior), max", "fp8 H200 (class prior), min"
        if gpu in t:
            both = t.dropna(subset=[prior, gpu])
            if len(both):
                ratio = both[gpu] / both[prior]
                ratio_lo = both[gpu_lo] / both[prior]
                batches = ", ".join(sorted(set(both["H200 batches"].dropna()))) or "?"
                lines.append(
                    f"- **H200 (cuDNN FP8 convolutions, the bench's check at batch {batches}: "
                    "the four calibration images repeated) against this CPU emulation, "
                    "largest error over those batches:** "
                    + ", ".join(
                        f"width {w:g} {r[gpu]:.1%} vs {r[prior]:.1%}" for w, r in both.iterrows()
                    )
                    + f" (H200 / CPU {ratio_lo.min():.2f}-{ratio.max():.2f}x over the batches). "
                    + (
                        "Every H200 batch is within 20 % of the emulation: the GPU path adds "
                        "no error of its own that this check can see."
                        if ((ratio - 1).abs() <= 0.2).all() and ((ratio_lo - 1).abs() <= 0.2).all()
                        else "They differ by more than 20 % at some width: the GPU path is not "
                        "only the emulated rounding there (other scales, accumulation or plans; "
                        "`tools/fp8_diag.py` compares them convolution by convolution)."
                    )
                )
    if "fp16" in t and len(t) >= 2:
        w0, w1 = t.index[0], t.index[1]
        cols = [c for c in ("fp16", "bf16", "fp8") if c in t]
        ratios = {c: t.loc[w0, c] / t.loc[w1, c] for c in cols}
        amp = ", ".join(f"{c} {r:.1f}x" for c, r in ratios.items())
        lines.append(
            f"- **The narrowest model amplifies rounding:** width {w0:g}'s errors over width "
            f"{w1:g}'s: {amp}. The error is the network's sensitivity times the format's step."
            if all(r > 1.5 for r in ratios.values())
            else f"- **Width {w0:g}'s errors over width {w1:g}'s:** {amp}."
        )
    return "\n".join(lines)

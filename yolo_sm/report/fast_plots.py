"""fast_plots: split from analyse.fast."""

from __future__ import annotations

from yolo_sm.analyse.fast import (
    CONV_PARTS,
    _best,
    _engines,
    _part_ms,
    _variant_order,
    failures,
    goal_summary,
    jitter,
    pipeline_table,
)
from yolo_sm.contract.vocab import PIPELINE_STAGES
from yolo_sm.report.colors import TEMPLATE


def plot_speedup_vs_width(bench, title: str | None = None):
    """Each engine's img/s over the baseline's against width, one panel per batch (model-only,
    the same unit of the run); the dotted line is the baseline."""
    import plotly.express as px

    e = _engines(bench).sort_values("width")
    fig = px.line(
        e,
        x="width",
        y="vs_baseline",
        color="variant",
        facet_col="batch",
        markers=True,
        hover_data=[c for c in ("img_per_s", "median_ms", "build_s") if c in e],
        category_orders={
            "variant": [v for v in _variant_order(bench) if v in set(e.variant)],
            "batch": sorted(e.batch.unique()),
        },
        template=TEMPLATE,
        title=title or "Speed-up over eager fp16 NHWC (img/s ratio, same run) vs width",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.for_each_annotation(lambda a: a.update(text=f"batch {a.text.split('=')[-1]}"))
    fig.update_yaxes(title_text="x baseline", col=1)
    fig.update_xaxes(title_text="width")
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return fig


def plot_pipeline(pipe, title: str | None = None):
    """Frames/s against width per batch: each pipeline row, its engine model-only and
    YOLO.predict (log scale)."""
    import pandas as pd
    import plotly.express as px

    first = pipe.drop_duplicates(["width", "batch"])
    long = pd.concat(
        [
            pipe.assign(what=pipe["streams"].map(lambda s: f"pipeline, {s:g} stream(s)"))[
                ["width", "batch", "what", "img_per_s"]
            ],
            first.assign(what="engine model-only", img_per_s=first["model_only_img_per_s"])[
                ["width", "batch", "what", "img_per_s"]
            ],
            first.assign(what="YOLO.predict", img_per_s=first["predict_img_per_s"])[
                ["width", "batch", "what", "img_per_s"]
            ],
        ],
        ignore_index=True,
    ).sort_values("width")
    fig = px.line(
        long,
        x="width",
        y="img_per_s",
        color="what",
        facet_col="batch",
        markers=True,
        log_y=True,
        template=TEMPLATE,
        title=title or "Frames to boxes: our pipeline vs its engine alone vs YOLO.predict",
    )
    fig.for_each_annotation(lambda a: a.update(text=f"batch {a.text.split('=')[-1]}"))
    fig.update_yaxes(title_text="frames/s", col=1)
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return fig


def _rng(s, fmt="{:.2f}") -> str:
    s = s.dropna()
    if s.empty:
        return "n/a"
    lo, hi = fmt.format(s.min()), fmt.format(s.max())
    return lo if lo == hi else f"{lo}-{hi}"


def fast_findings(bench, checks, peak: tuple[float, str]) -> str:
    """The findings of notebook 08 as markdown, every number computed from the bench table."""
    prov = bench.attrs.get("provenance", {}) or {}
    gpu = prov.get("gpu_name") or (
        bench["prov_gpu_name"].iloc[0] if "prov_gpu_name" in bench else ""
    )
    lines = [f"**Findings ({gpu or 'unknown GPU'}).**", ""]
    if "SYNTHETIC" in str(gpu).upper():
        lines += ["> **These numbers come from a synthetic test fixture, not from a GPU.**", ""]
    eng = _engines(bench)
    for b in sorted(eng["batch"].unique()):
        best = _best(bench, b, include_8bit=False)
        if best.empty:
            continue
        speed, lat = best["img_per_s"] / best["base_img"], best["median_ms"] / best["base_ms"]
        wins = ", ".join(f"`{v}` at {n}" for v, n in best["variant"].value_counts().items())
        lines.append(
            f"- **Batch {b:g}, best 16-bit engine per width:** {_rng(speed)}x the baseline's "
            f"img/s (latency {_rng(lat)}x) across widths {best.index.min():g}-"
            f"{best.index.max():g}; fastest: {wins} width(s)."
        )
    per = eng.groupby("variant").agg(
        speedup=("vs_baseline", "median"), build=("build_s", "median"), n=("vs_baseline", "size")
    )
    parts = [f"`{v}` {r.speedup:.2f}x (median build {r.build:.0f} s)" for v, r in per.iterrows()]
    lines.append("- **Per engine, median over widths and batches:** " + "; ".join(parts) + ".")
    pt = pipeline_table(bench)
    if len(pt):
        for b, g in pt.groupby("batch"):
            lines.append(
                f"- **Frames to boxes, batch {b:g}:** the pipeline delivers "
                f"{_rng(g['vs_predict'], '{:.1f}')}x YOLO.predict's frames/s and "
                f"{_rng(g['pipeline_vs_model_only'], '{:.0%}')} of its engine's model-only img/s."
            )
    j = jitter(bench)
    if len(j):
        lines.append(
            f"- **Jitter (p99 - p50 latency of a batch):** {int(j['streams'].max())} streams "
            f"instead of 1 change it by {_rng(-j['reduction'], '{:+.0%}')} (median "
            f"{-j['reduction'].median():+.0%}) over {len(j)} (width, batch) pairs."
        )
    summary = goal_summary(checks)
    for r in summary.itertuples():
        lines.append(
            f"- **Goal {r.goal} {r.status}** ({r.text}): {r.checks_met} checks met; "
            f"{r.closest_or_worst}."
        )
    lines.append(f"- The fp16 peak of goal 2 is {peak[0]:.0f} TFLOP/s: {peak[1]}.")
    bad = failures(bench)
    if len(bad):
        msgs = "; ".join(
            f"`{v}` ({len(g)}x): {g['message'].iloc[0]}" for v, g in bad.groupby("variant")
        )
        lines.append(f"- **{len(bad)} row(s) did not run:** {msgs}.")
    return "\n".join(lines)


def fp8_time_findings(breakdown, fp16: str, fp8: str) -> str:
    """One paragraph: the fp8 engine's convolutions (with their fused epilogues) and quantisation
    passes against the fp16 engine's convolutions, bias adds and SiLU, per forward."""
    b = breakdown
    epilogue = ["add (bias, residual)", "SiLU"]
    c16, epi16 = _part_ms(b, fp16, CONV_PARTS), _part_ms(b, fp16, epilogue)
    c8, q8 = _part_ms(b, fp8, CONV_PARTS), _part_ms(b, fp8, ["fp8 quantisation"])
    epi8 = _part_ms(b, fp8, epilogue)
    return (
        f"Per forward, the fp16 engine spends {c16:.1f} ms in convolutions and {epi16:.1f} ms in "
        f"separate bias-add / residual-add and SiLU kernels ({c16 + epi16:.1f} ms together); the "
        f"fp8 engine spends {c8:.1f} ms in its convolutions, whose epilogues already apply the "
        f"bias and SiLU, {epi8:.1f} ms in the remaining adds, and {q8:.1f} ms quantising their "
        f"inputs ({c8 + epi8 + q8:.1f} ms together). Totals: {b.loc['total', fp16]:.1f} ms "
        f"(fp16) and {b.loc['total', fp8]:.1f} ms (fp8)."
    )


def compile_time_findings(breakdown, launches, eager: str = "eager", compiled: str = "compile"):
    """One paragraph: what torch.compile changed per forward - the convolutions (cuDNN in both)
    against everything else, which inductor replaces by its own fused Triton kernels."""
    b = breakdown
    c_e, c_c = _part_ms(b, eager, CONV_PARTS), _part_ms(b, compiled, CONV_PARTS)
    rest_e = float(b.loc["total", eager]) - c_e
    rest_c = float(b.loc["total", compiled]) - c_c
    tri = _part_ms(b, compiled, ["fused by torch.compile (Triton)"])
    return (
        f"Per forward, the convolutions take {c_e:.1f} ms in the eager engine and {c_c:.1f} ms "
        f"in the compiled one (cuDNN / cuBLAS kernels in both); everything else - bias and "
        f"residual adds, SiLU, concatenation copies, pooling and upsampling - takes "
        f"{rest_e:.1f} ms eagerly and {rest_c:.1f} ms compiled, {tri:.1f} ms of it in "
        f"inductor's fused Triton kernels. Kernel launches per forward: "
        f"{launches[eager]:.0f} eager, {launches[compiled]:.0f} compiled. Totals: "
        f"{b.loc['total', eager]:.1f} ms and {b.loc['total', compiled]:.1f} ms "
        f"({b.loc['total', eager] / b.loc['total', compiled]:.2f}x)."
    )


def probe_findings(probe) -> str:
    """Markdown: what bounds a pipeline batch, from the probe's own figures (no number is
    written here that the table does not hold)."""

    t = probe.set_index("stage")
    u = probe.iloc[0]
    ms = t["wall_ms"]
    gpu = t["gpu_ms"]
    alone = float(ms.reindex(list(PIPELINE_STAGES)).sum())
    eng = float(ms.get("engine"))
    lines = [
        f"**The pipeline stage by stage** ({u['family']} width {u['width']:g}, batch "
        f"{int(u['batch'])} of `{u['frames']}` frames, engine `{u['engine']}`, "
        f"{u['candidates_per_frame']:,.0f} candidates and {u['boxes_per_frame']:,.0f} boxes per "
        "frame, NMS `" + str(u["nms"]) + "`).",
        "",
        f"- Each stage alone: the engine takes {eng:.2f} ms of the {alone:.2f} ms the five "
        f"stages sum to ({eng / alone:.0%}); post-processing "
        f"{float(ms['postprocess']):.2f} ms, letterbox {float(ms['letterbox']):.2f} ms, decode "
        f"{float(ms['decode']):.2f} ms, the copy to the device {float(ms['h2d']):.2f} ms.",
    ]
    if gpu.notna().any():
        host = float(ms["postprocess"] - gpu["postprocess"])
        lines.append(
            f"- Post-processing's GPU-event time is {float(gpu['postprocess']):.2f} ms of its "
            f"{float(ms['postprocess']):.2f} ms wall time ({host:+.2f} ms on the host after the "
            "GPU finished): its host syncs are in the events' span, so this splits launch "
            "overhead off only roughly; `tools/pipeline_probe.py` adds a torch.profiler table."
        )
    for alt in [s for s in t.index if ": " in s]:  # a stage run another way
        base, how = alt.split(": ", 1)
        same = t.loc[alt, "same_result"] if "same_result" in t else None
        said = (
            "" if same is None or same != same  # not compared (None / NaN)
            else ", same result" if bool(same) else ", a different result"
        )  # fmt: skip
        lines.append(
            f"- {base.capitalize()} with {how}: {float(ms[alt]):.2f} ms "
            f"({float(ms[alt]) / float(ms[base]):.1f}x the {base} row){said}."
        )
    one, three = float(ms["batch, 1 stream"]), float(ms["batch, 3 streams"])
    lines.append(
        f"- Whole batches: {one:.2f} ms per batch with one in flight, {three:.2f} ms with "
        f"three ({one / three:.2f}x), against {eng:.2f} ms for the engine alone: the pipeline "
        f"runs at {eng / three:.0%} of the engine's rate at 3 streams."
    )
    return "\n".join(lines)

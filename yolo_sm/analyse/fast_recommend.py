"""What to deploy, from the fast-engines bench (notebook 10): per batch regime and width, the
engine with the most images per second, its absolute latency and throughput, build time and
peak memory, and what it costs in use (static shapes, recompiles, quantisation); every engine
ranked per batch regime with its share of the measured matmul roof. And the workload caveat:
how many candidates the post-processing saw per frame.

Every comparison is inside one (width, batch) unit of the bench, whose variants ran one after
another in the same process (``vs_baseline`` is the same-process ratio to eager fp16 NHWC);
no ratio takes its baseline from another run.
"""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.fast import BASELINE, engines

#: The same-unit baseline that does not carry eager's host-launch jitter at batch 1.
GRAPH = "cudagraph/fp16/nhwc"

#: The batch sizes' regimes.
REGIMES = {1: "latency: one frame at a time", 16: "small batches", 64: "throughput"}
#: Two engines within this fraction of the best img/s count as equally fast; the one that
#: builds faster is recommended.
NEAR = 0.05
#: What each engine asks of its user (a property of the engine, not a measurement).
CAVEATS = {
    "eager": "none: any shape, no build step",
    "cudagraph": "static shapes: one captured graph per batch and image size, inputs copied "
    "into fixed buffers",
    "compile": "first call compiles (build time); a new input shape recompiles",
    "compile:reduce-overhead": "compiles, then replays CUDA graphs: static shapes, and a new "
    "shape recompiles and captures again",
}
#: Columns the table reads when the bench has them (NaN otherwise).
OPTIONAL = ("build_s", "peak_mem_bytes", "iqr_ms", "vs_baseline")
EIGHT_BIT_CAVEAT = "8-bit: quantised weights and activations, check the numerics table's boxes"


def caveat(variant: str) -> str:
    """What engine ``variant`` (``backend/precision/layout``) asks of its user."""
    parts = variant.split("/")
    engine, *rewrites = parts[0].split("+")  # compile:MODE+REWRITE: exact, nothing to ask
    text = CAVEATS.get(engine, "")
    if rewrites:
        text = f"{text}; the model rewritten first ({', '.join(rewrites)}: exact)"
    if any(p in ("fp8", "int8") for p in parts[1:]):
        text = f"{text}; {EIGHT_BIT_CAVEAT}" if text else EIGHT_BIT_CAVEAT
    return text


def recommend(bench: pd.DataFrame, near: float = NEAR) -> pd.DataFrame:
    """One row per (batch, width) unit: the recommended model-only engine (the most img/s; of
    those within ``near`` of it, the one with the shortest build), with ``regime``,
    ``median_ms`` (latency per batch), ``img_per_s``, ``vs_baseline`` (same-process ratio to
    eager fp16 NHWC), ``baseline_ms`` and ``baseline_iqr_pct`` (the eager latency of the same
    unit and its spread, IQR over median in %), ``vs_cudagraph`` (img/s over the CUDA graph
    of the same unit: a baseline without eager's host-launch jitter), ``build_s`` (in this
    unit), ``longest_build_s`` (of the same engine over the width's units: the bench builds
    each width's units in one process, so later units can reuse compiled code),
    ``peak_mem_bytes``, ``runner_up``
    (the next engine and its img/s ratio to the pick) and ``caveats``."""
    e = engines(bench, baseline=True)
    for col in OPTIONAL:  # a bench that predates a column leaves it empty
        if col not in e:
            e = e.assign(**{col: float("nan")})
    rows = []
    for (batch, width), g in e.groupby(["batch", "width"]):
        g = g.sort_values("img_per_s", ascending=False)
        best = g.img_per_s.iloc[0]
        close = g[g.img_per_s >= (1 - near) * best].sort_values("build_s", na_position="last")
        pick = close.iloc[0]
        rest = g[g.variant != pick.variant]
        base = g[g.variant == BASELINE]
        b = base.iloc[0] if len(base) else None
        graph = g[g.variant == GRAPH]
        same_width = e[(e.width == width) & (e.variant == pick.variant)]
        rows.append(
            {
                "batch": int(batch),
                "regime": REGIMES.get(int(batch), ""),
                "width": width,
                "engine": pick.variant,
                "median_ms": pick.median_ms,
                "img_per_s": pick.img_per_s,
                "vs_baseline": pick.vs_baseline,
                "baseline_ms": b.median_ms if b is not None else float("nan"),
                "baseline_iqr_pct": 100 * b.iqr_ms / b.median_ms if b is not None else float("nan"),
                "vs_cudagraph": (
                    pick.img_per_s / graph.img_per_s.iloc[0] if len(graph) else float("nan")
                ),
                "build_s": pick.build_s,
                "longest_build_s": same_width.build_s.max(),
                "peak_mem_bytes": pick.peak_mem_bytes,
                "runner_up": (
                    f"{rest.variant.iloc[0]} ({rest.img_per_s.iloc[0] / pick.img_per_s:.2f}x)"
                    if len(rest)
                    else ""
                ),
                "caveats": caveat(pick.variant),
            }
        )
    return pd.DataFrame(rows).sort_values(["batch", "width"], ignore_index=True)


def recommend_by_batch(rec: pd.DataFrame) -> pd.DataFrame:
    """:func:`recommend` per batch regime: the engine picked at most widths (``engine``, and
    at how many of the widths, ``widths_picked``), its latency and img/s range over those
    widths, the range of its same-process ratio to eager, its longest build and largest peak
    memory, and its caveats."""
    rows = []
    for batch, g in rec.groupby("batch"):
        engine = g.engine.value_counts().idxmax()
        s = g[g.engine == engine]
        rows.append(
            {
                "batch": batch,
                "regime": g.regime.iloc[0],
                "engine": engine,
                "widths_picked": f"{len(s)} of {len(g)}",
                "median_ms": f"{s.median_ms.min():.2f}-{s.median_ms.max():.2f}",
                "img_per_s": f"{s.img_per_s.min():,.0f}-{s.img_per_s.max():,.0f}",
                "vs_baseline": f"{s.vs_baseline.min():.2f}-{s.vs_baseline.max():.2f}x",
                "longest_build_s": s.longest_build_s.max(),
                "peak_mem_bytes": s.peak_mem_bytes.max(),
                "caveats": caveat(engine),
            }
        )
    return pd.DataFrame(rows)


def _span(values, fmt: str) -> str:
    """``min-max`` of ``values`` in format ``fmt`` (one value once; empty without any)."""
    v = pd.Series(values, dtype=float).dropna()
    if v.empty:
        return ""
    lo, hi = format(v.min(), fmt), format(v.max(), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


def ranking(bench: pd.DataFrame, peaks: dict | None = None) -> pd.DataFrame:
    """Per batch regime, every model-only engine of the bench ranked by its img/s over the
    fastest engine of each (width, batch) unit it ran (``of_fastest``, median over those
    widths; 1 = fastest everywhere): ``batch``, ``regime``, ``rank``, ``engine``, ``widths``
    (how many it ran of the regime's), ``median_ms`` (latency per batch) and ``img_per_s``
    (their range over the widths), ``vs_baseline`` (range of the same-process ratio to eager
    fp16 NHWC), ``longest_build_s``, ``peak_mem_gib`` (the largest), ``roof_pct`` (its TFLOP/s
    over ``peaks[precision]``, the measured dense matmul peak of its precision in TFLOP/s,
    median over widths, %; NaN without one) and ``caveats``."""
    e = engines(bench, baseline=True)
    for col in (*OPTIONAL, "tflops", "precision"):  # a bench that predates a column
        if col not in e:
            e = e.assign(**{col: float("nan")})
    if e.empty:
        return pd.DataFrame()
    e = e.assign(
        of_fastest=e.img_per_s / e.groupby(["batch", "width"]).img_per_s.transform("max"),
        roof_pct=100 * e.tflops / e.precision.map(peaks or {}).astype(float),
    )
    rows = []
    for batch, g in e.groupby("batch"):
        n = g.width.nunique()
        for engine, r in g.groupby("variant"):
            rows.append(
                {
                    "batch": int(batch),
                    "regime": REGIMES.get(int(batch), ""),
                    "engine": engine,
                    "of_fastest": r.of_fastest.median(),
                    "widths": f"{r.width.nunique()} of {n}",
                    "median_ms": _span(r.median_ms, ".2f"),
                    "img_per_s": _span(r.img_per_s, ",.0f"),
                    "vs_baseline": _span(r.vs_baseline, ".2f"),
                    "longest_build_s": r.build_s.max(),
                    "peak_mem_gib": r.peak_mem_bytes.max() / 2**30,
                    "roof_pct": r.roof_pct.median(),
                    "caveats": caveat(engine),
                }
            )
    out = pd.DataFrame(rows).sort_values(["batch", "of_fastest"], ascending=[True, False])
    out.insert(2, "rank", out.groupby("batch").cumcount() + 1)
    return out.reset_index(drop=True)


def workload(bench: pd.DataFrame) -> dict:
    """The post-processing load the frames-to-boxes rows measured: the most and fewest
    candidates NMS saw per frame, the most boxes it kept per frame, and at which (width,
    batch) the most candidates came; empty when the bench has no such columns."""
    if "candidates_per_frame" not in bench:
        return {}
    p = bench.dropna(subset=["candidates_per_frame"])
    if p.empty:
        return {}
    top = p.loc[p.candidates_per_frame.idxmax()]
    return {
        "max_candidates_per_frame": float(p.candidates_per_frame.max()),
        "min_candidates_per_frame": float(p.candidates_per_frame.min()),
        "max_boxes_per_frame": float(p.boxes_per_frame.max()),
        "at_width": float(top.width),
        "at_batch": int(top.batch),
    }


def workload_sentence(bench: pd.DataFrame) -> str:
    """The workload caveat in one Markdown sentence, numbers from :func:`workload`."""
    w = workload(bench)
    base = (
        "The models carry random weights: a trained detector scores few anchors above the "
        "confidence threshold, a random one scores many"
    )
    if not w:
        return base + "; this bench did not count the candidates per frame."
    return (
        f"{base}. Here NMS saw {w['min_candidates_per_frame']:,.0f} to "
        f"{w['max_candidates_per_frame']:,.0f} candidates per frame (the most at width "
        f"{w['at_width']:g}, batch {w['at_batch']}) and kept up to "
        f"{w['max_boxes_per_frame']:,.0f} boxes per frame: read the frames-to-boxes rows as a "
        "worst case for post-processing, the model-only rows as unaffected."
    )

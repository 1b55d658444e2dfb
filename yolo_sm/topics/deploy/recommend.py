"""What to deploy, from a bench (notebook 10, ``yolo-sm bench``): every path ranked per
(model, batch) unit (:func:`ranking`), the frames-to-boxes path to deploy per batch regime
beside the fastest model-only engine (:func:`deploy`, :func:`deploy_line`); per batch regime
and width, the model-only engine with the most images per second, its absolute latency and
throughput, build time and peak memory, and what it costs in use (static shapes, recompiles,
quantisation) (:func:`recommend`); every model-only engine ranked per batch regime with its share of
the measured matmul roof (:func:`engine_ranking`). And the workload caveat: how many candidates the
post-processing saw per frame.

Every comparison is inside one (width, batch) unit of the bench, whose variants ran one after
another in the same process (``vs_baseline`` is the same-process ratio to eager fp16 NHWC);
no ratio takes its baseline from another run.
"""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.bench_table import PIPELINE, PREDICT, ok_rows, pipeline_engine
from yolo_sm.topics.deploy.analyse import BASELINE, engines

#: The same-unit baseline that does not carry eager's host-launch jitter at batch 1.
GRAPH = "cudagraph/fp16/nhwc"

#: The batch sizes' regimes.
REGIMES = {1: "latency: one frame at a time", 16: "small batches", 64: "throughput"}
#: The batch of the latency regime: there :func:`deploy` picks the path of lowest latency.
LATENCY_BATCH = 1
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


def regime(batch: int) -> str:
    """The regime of a batch size (:data:`REGIMES`, else ``batch N``)."""
    return REGIMES.get(int(batch), f"batch {int(batch)}")


def path_caveat(variant: str) -> str:
    """:func:`caveat` of a bench row's variant: a pipeline's that of the engine it wraps (and
    of its whole-batch CUDA graphs), YOLO.predict's none."""
    if variant == PREDICT:
        return "none: ultralytics' own pre- and post-processing"
    if variant.startswith(PIPELINE):
        text = caveat(pipeline_engine(variant))
        if "/graph/" in variant:
            text += "; one CUDA graph per batch in flight: static batch and frame size"
        return text
    return caveat(variant)


def _unit_keys(bench: pd.DataFrame) -> list[str]:
    return [c for c in ("family", "width", "batch") if c in bench]


#: the columns of :func:`ranking`, in order (those the bench lacks are left out)
RANKING_COLUMNS = (
    "model", "family", "width", "batch", "regime", "rank", "scope", "variant", "img_per_s",
    "vs_fastest_engine", "median_ms", "p99_ms", "build_s", "peak_mem_bytes", "caveats",
)  # fmt: skip


def ranking(bench: pd.DataFrame) -> pd.DataFrame:
    """Every ok row of a bench ranked per (family, width, batch) unit, most img/s first:
    ``regime``, ``rank`` (1: the most images per second of the unit, model-only engines and
    frames-to-boxes paths together), ``scope`` (model_only: the forward alone;
    frames_to_boxes: uint8 frames in, boxes on the host out), ``variant``, ``img_per_s``,
    ``vs_fastest_engine`` (img/s over the unit's fastest model-only engine; NaN where none
    ran), ``median_ms`` / ``p99_ms`` (latency of one batch; frames-to-boxes: submission to
    boxes, queueing behind the batches in flight included), ``build_s``, ``peak_mem_bytes``
    and ``caveats`` (:func:`path_caveat`)."""
    ok = ok_rows(bench)
    ok = ok[ok["img_per_s"] > 0]
    keys = _unit_keys(ok)
    out = ok.sort_values([*keys, "img_per_s"], ascending=[True] * len(keys) + [False])
    engine = out["img_per_s"].where(out["scope"] == "model_only")
    best = engine.groupby([out[k] for k in keys]).transform("max")
    out = out.assign(
        regime=out["batch"].map(regime),
        rank=out.groupby(keys).cumcount() + 1,
        vs_fastest_engine=out["img_per_s"] / best,
        caveats=out["variant"].map(path_caveat),
    )
    return out[[c for c in RANKING_COLUMNS if c in out]].reset_index(drop=True)


def deploy(bench: pd.DataFrame, near: float = NEAR) -> pd.DataFrame:
    """One row per (family, width, batch) unit of a bench: what to deploy there. ``deploy`` is
    the frames-to-boxes path with the most img/s (of those within ``near`` of it, the one of
    lowest median latency: fewer batches in flight; at :data:`LATENCY_BATCH` the one of lowest
    median latency), or where none ran the fastest model-only engine (of those within ``near``
    of it, the one that builds fastest); ``scope`` says which. With its ``img_per_s``,
    ``median_ms``, ``p99_ms`` and ``caveats``; the unit's ``fastest_engine`` (model-only),
    its ``engine_img_per_s``, ``vs_fastest_engine`` (the pick's img/s over it) and
    ``predict_img_per_s`` (ultralytics' YOLO.predict on the same frames; NaN where it did not
    run)."""
    r = ranking(bench)
    rows = []
    for key, g in r.groupby(_unit_keys(r), sort=True):
        key = dict(zip(_unit_keys(r), key if isinstance(key, tuple) else (key,), strict=True))
        frames = g[g["scope"] == "frames_to_boxes"]
        eng = g[g["scope"] == "model_only"]
        if not len(frames):
            close = eng[eng["img_per_s"] >= (1 - near) * eng["img_per_s"].max()]
            pick = close.sort_values(["build_s", "rank"], na_position="last").iloc[0]
        elif int(key["batch"]) == LATENCY_BATCH:
            pick = frames.sort_values(["median_ms", "rank"]).iloc[0]
        else:
            close = frames[frames["img_per_s"] >= (1 - near) * frames["img_per_s"].max()]
            pick = close.sort_values(["median_ms", "rank"]).iloc[0]
        top = eng.iloc[0] if len(eng) else None
        predict = g[g["variant"] == PREDICT]
        rows.append(
            {
                **({"model": pick["model"]} if "model" in g else {}),
                **key,
                "regime": regime(key["batch"]),
                "deploy": pick["variant"],
                "scope": pick["scope"],
                "img_per_s": pick["img_per_s"],
                "median_ms": pick["median_ms"],
                "p99_ms": pick.get("p99_ms", float("nan")),
                "vs_fastest_engine": pick["vs_fastest_engine"],
                "fastest_engine": top["variant"] if top is not None else "",
                "engine_img_per_s": top["img_per_s"] if top is not None else float("nan"),
                "predict_img_per_s": (
                    predict["img_per_s"].iloc[0] if len(predict) else float("nan")
                ),
                "caveats": pick["caveats"],
            }
        )
    return pd.DataFrame(rows)


def deploy_line(row) -> str:
    """A :func:`deploy` row as one line: what to deploy in that regime and how it compares."""
    where = row["model"] if "model" in row and isinstance(row["model"], str) else (
        f"width {row['width']:g}"
    )  # fmt: skip
    head = f"{where}, batch {row['batch']} ({row['regime']}): deploy {row['deploy']}"
    if row["scope"] != "frames_to_boxes":
        return (
            f"{head}, model-only at {row['img_per_s']:,.0f} img/s ({row['median_ms']:.3g} ms per "
            "batch); no frames-to-boxes path ran, so pre- and post-processing are yours to add"
        )
    text = (
        f"{head}, frames to boxes at {row['img_per_s']:,.0f} img/s ({row['median_ms']:.3g} ms "
        "per batch)"
    )
    if row["fastest_engine"]:
        text += (
            f", {row['vs_fastest_engine']:.2f}x the fastest model-only engine "
            f"({row['fastest_engine']}, {row['engine_img_per_s']:,.0f} img/s)"
        )
    if row["predict_img_per_s"] == row["predict_img_per_s"] and row["deploy"] != PREDICT:
        text += f"; YOLO.predict: {row['predict_img_per_s']:,.0f} img/s"
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


def engine_ranking(bench: pd.DataFrame, peaks: dict | None = None) -> pd.DataFrame:
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

"""What to deploy, from a bench (notebook 10 and ``yolo-sm bench``): every path ranked per batch
regime and the path to deploy in each; ratios inside one (model, batch) unit."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.bench_table import PIPELINE, PREDICT, ok_rows, pipeline_engine

#: The batch sizes' regimes.
REGIMES = {1: "latency: one frame at a time", 16: "small batches", 64: "throughput"}
#: Paths within this fraction of the best img/s count as equally fast (then: lower latency, or
#: for model-only engines the shorter build).
NEAR = 0.05
#: What each engine asks of its user (a property of the engine, not a measurement).
CAVEATS = {
    "eager": "none: any shape, no build step",
    "cudagraph": "static shapes: one captured graph per batch and image size",
    "compile": "first call compiles (build time); a new input shape recompiles",
    "compile:reduce-overhead": "compiles, then replays CUDA graphs: static shapes",
}


def caveat(variant: str) -> str:
    """What the path ``variant`` asks of its user (a pipeline: that of the engine it wraps)."""
    if variant == PREDICT:
        return "none: ultralytics' own pre- and post-processing"
    engine = pipeline_engine(variant) if variant.startswith(PIPELINE) else variant
    parts = engine.split("/")
    name, *rewrites = parts[0].split("+")
    text = CAVEATS.get(name, "")
    if rewrites:
        text += f"; the model rewritten first ({', '.join(rewrites)}: exact)"
    if any(p in ("fp8", "int8") for p in parts[1:]):
        text += "; 8-bit: quantised weights and activations, check the numerics"
    if variant.startswith(PIPELINE) and "/graph/" in variant:
        text += "; one CUDA graph per batch in flight: static batch and frame size"
    return text


def regime(batch: int) -> str:
    return REGIMES.get(int(batch), f"batch {int(batch)}")


#: the columns of :func:`ranking`
COLUMNS = (
    "batch", "regime", "rank", "scope", "variant", "units", "vs_fastest_engine", "img_per_s",
    "median_ms", "p99_ms", "build_s", "peak_mem_gib", "roof_pct", "caveats",
)  # fmt: skip


def ranking(bench: pd.DataFrame, peaks: dict | None = None) -> pd.DataFrame:
    """Per batch, ok paths ranked by img/s over their unit's fastest model-only engine (median),
    with latency ms, build s, peak GiB and ``roof_pct`` (TFLOP/s over ``peaks[precision]``, %)."""
    ok = ok_rows(bench)
    ok = ok[ok["img_per_s"] > 0]
    for col in ("p99_ms", "build_s", "peak_mem_bytes", "tflops", "precision"):
        if col not in ok:
            ok = ok.assign(**{col: float("nan")})
    unit = [ok[k] for k in ("family", "width", "model", "batch") if k in ok]
    fastest = ok["img_per_s"].where(ok["scope"] == "model_only").groupby(unit).transform("max")
    peak = ok["precision"].map(peaks or {}).astype(float)
    ok = ok.assign(
        vs_fastest_engine=ok["img_per_s"] / fastest,
        roof_pct=100 * ok["tflops"].astype(float) / peak,
        peak_mem_gib=ok["peak_mem_bytes"].astype(float) / 2**30,
    )
    out = (
        ok.groupby(["batch", "scope", "variant"], sort=False)
        .agg(
            units=("img_per_s", "size"),
            **{c: (c, "median") for c in ("vs_fastest_engine", "img_per_s", "median_ms", "p99_ms")},
            **{c: (c, "max") for c in ("build_s", "peak_mem_gib")},
            roof_pct=("roof_pct", "median"),
        )
        .reset_index()
        .sort_values(["batch", "vs_fastest_engine", "img_per_s"], ascending=[True, False, False])
    )
    out = out.assign(
        regime=out["batch"].map(regime),
        rank=out.groupby("batch").cumcount() + 1,
        caveats=out["variant"].map(caveat),
    )
    return out[list(COLUMNS)].reset_index(drop=True)


def deploy(ranked: pd.DataFrame, near: float = NEAR) -> pd.DataFrame:
    """Per batch of a :func:`ranking`: the lowest-latency frames-to-boxes path within ``near`` of
    the most img/s (batch 1: of all); without one, the engine so near with the shortest build."""
    rows = []
    for batch, g in ranked.groupby("batch"):
        paths = g[(g["scope"] == "frames_to_boxes") & (g["variant"] != PREDICT)]
        engines = g[g["scope"] == "model_only"]
        if paths.empty:
            close = engines[engines["img_per_s"] >= (1 - near) * engines["img_per_s"].max()]
            pick = close.sort_values(["build_s", "rank"], na_position="last").iloc[0]
        else:
            if batch != 1:
                paths = paths[paths["img_per_s"] >= (1 - near) * paths["img_per_s"].max()]
            pick = paths.sort_values(["median_ms", "rank"]).iloc[0]
        predict = g.loc[g["variant"] == PREDICT, "img_per_s"]
        top = engines.iloc[0] if len(engines) else None
        rows.append(
            {
                "batch": int(batch),
                "regime": regime(batch),
                "deploy": pick["variant"],
                **pick[["scope", "img_per_s", "median_ms", "vs_fastest_engine"]],
                "fastest_engine": "" if top is None else top["variant"],
                "engine_img_per_s": float("nan") if top is None else top["img_per_s"],
                "predict_img_per_s": predict.iloc[0] if len(predict) else float("nan"),
                "caveats": pick["caveats"],
            }
        )
    return pd.DataFrame(rows)


def deploy_line(row) -> str:
    """A :func:`deploy` row as one sentence."""
    head = f"batch {row['batch']} ({row['regime']}): deploy {row['deploy']}"
    what = "frames to boxes" if row["scope"] == "frames_to_boxes" else "model-only"
    text = f"{head}, {what} at {row['img_per_s']:,.0f} img/s ({row['median_ms']:.3g} ms per batch)"
    if row["scope"] != "frames_to_boxes":
        return text + "; no frames-to-boxes path ran: pre- and post-processing are yours to add"
    if row["fastest_engine"]:
        text += (
            f", {row['vs_fastest_engine']:.2f}x the fastest model-only engine "
            f"({row['fastest_engine']}, {row['engine_img_per_s']:,.0f} img/s)"
        )
    if pd.notna(row["predict_img_per_s"]):
        text += f"; YOLO.predict: {row['predict_img_per_s']:,.0f} img/s"
    return text


def workload_sentence(bench: pd.DataFrame) -> str:
    """The workload caveat in one Markdown sentence: how many candidates NMS saw per frame."""
    base = (
        "The models carry random weights: a trained detector scores few anchors above the "
        "confidence threshold, a random one scores many"
    )
    p = bench.dropna(subset=["candidates_per_frame"]) if "candidates_per_frame" in bench else []
    if not len(p):
        return base + "; this bench did not count the candidates per frame."
    c = p["candidates_per_frame"]
    return (
        f"{base}. Here NMS saw {c.min():,.0f} to {c.max():,.0f} candidates per frame and kept up "
        f"to {p['boxes_per_frame'].max():,.0f} boxes per frame: read the frames-to-boxes rows "
        "as a worst case for post-processing, the model-only rows as unaffected."
    )

"""Frames to boxes (notebook 10): the benches' pipeline rows and the probes, as tables and
``fast.*`` facts; each ratio inside one (width, batch) unit of one table."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.bench_table import PIPELINE, PREDICT, ok_rows
from yolo_sm.analyse.facts import fact
from yolo_sm.contract.vocab import PIPELINE_MODES, PIPELINE_STAGES

#: the benches that hold pipeline rows in several modes
PIPELINE_DATASETS = ("bench_fast_engines", "bench_pipeline", "bench_deploy")
#: the first pipeline probe of the full plan, named where a root holds none
PROBE = "probe_pipeline_w05_b16"

PIPELINE_COLUMNS = [
    "width", "batch", "variant", "streams", "img_per_s", "median_ms", "p99_ms", "jitter_ms",
    "model_only_img_per_s", "pipeline_vs_model_only", "predict_img_per_s", "vs_predict",
]  # fmt: skip


def pipeline_table(bench):
    """Per pipeline row: frames/s, latency and jitter (ms), its engine's img/s, YOLO.predict's
    frames/s and the ratios."""
    ok = ok_rows(bench)
    pipe = ok[ok["variant"].str.startswith(PIPELINE)]
    pred = ok[ok["variant"] == PREDICT].set_index(["width", "batch"])["img_per_s"]
    key = pipe.set_index(["width", "batch"]).index
    out = pipe.assign(
        jitter_ms=pipe["p99_ms"] - pipe["median_ms"],
        predict_img_per_s=pred.reindex(key).to_numpy(),
    ).assign(vs_predict=lambda d: d["img_per_s"] / d["predict_img_per_s"])
    extra = [c for c in ("pipeline_mode", "candidates_per_frame", "boxes_per_frame") if c in pipe]
    return out[PIPELINE_COLUMNS + extra].sort_values(
        ["width", "batch", "streams"], ignore_index=True
    )


def mode_table(bench):
    """Per (width, batch): the most frames/s of each pipeline mode and ``<mode>_over_full``."""
    pipe = pipeline_table(bench)
    if pipe.empty:
        return pd.DataFrame(columns=["width", "batch"])
    mode = pipe["pipeline_mode"].fillna("full") if "pipeline_mode" in pipe else "full"
    pipe = pipe.assign(mode=mode)
    best = pipe.pivot_table(
        index=["width", "batch"], columns="mode", values="img_per_s", aggfunc="max"
    ).reindex(columns=[m for m in PIPELINE_MODES if m in set(pipe["mode"])])
    best.columns.name = None
    if "full" in best:
        for m in best.columns.drop("full"):
            best[f"{m}_over_full"] = best[m] / best["full"]
    return best.reset_index()


def mode_facts(tables: dict) -> list[dict]:
    """The least graph-over-full pipeline ratio over the units of ``tables`` (name -> bench)."""
    ratios = {}
    for name, t in tables.items():
        m = mode_table(t)
        if "graph_over_full" in m and m["graph_over_full"].notna().any():
            ratios[name] = m["graph_over_full"].dropna()
    if not ratios:
        return []
    r = pd.concat(ratios.values())
    return [fact("fast.pipeline_graph_over_full_min", r.min(), "x", datasets=tuple(ratios))]


def probe_stages(probes: dict):
    """Every probe stage by stage: GPU and wall ms and the share of a 1-stream batch."""
    blocks = []
    for probe in probes.values():
        out = probe[[c for c in ("stage", "gpu_ms", "wall_ms", "same_result") if c in probe]]
        one = probe.loc[probe.stage == "batch, 1 stream", "wall_ms"]
        share = out["wall_ms"] / float(one.iloc[0]) if len(one) else math.nan
        first = probe.iloc[0] if len(probe) else {}
        blocks.append(
            out.assign(share_of_1_stream_batch=share)
            .assign(width=first.get("width"), batch=first.get("batch"))
        )  # fmt: skip
    if not blocks:
        return pd.DataFrame(columns=["width", "batch", "stage", "gpu_ms", "wall_ms"])
    out = pd.concat(blocks, ignore_index=True)
    out = out[["width", "batch", *[c for c in out.columns if c not in ("width", "batch")]]]
    return out.sort_values(["width", "batch"], kind="stable", ignore_index=True)


#: the probe facts and how :func:`probe_facts` takes them over several probes: the value least
#: favourable to its rule (the rules hold for every probe or not at all)
PROBE_FACTS = {
    "fast.probe_engine_share_pct": ("%", min),
    "fast.probe_compiled_stages_over_eager": ("x", max),
    "fast.probe_1_over_3_streams": ("x", min),
}


def probe_values(probe) -> dict[str, float]:
    """One probe's values of :data:`PROBE_FACTS` (engine share of the stages' wall time, %;
    compiled over eager GPU time; one stream over three), those it can give."""
    by_stage = probe.set_index("stage")
    ms, gpu = by_stage["wall_ms"], by_stage["gpu_ms"]
    out = {}
    stages = ms.reindex(list(PIPELINE_STAGES))
    if stages.notna().all() and "engine" in ms:
        out["fast.probe_engine_share_pct"] = ms["engine"] / stages.sum() * 100
    eager, compiled = ["letterbox", "decode"], ["letterbox: compiled", "decode: compiled"]
    if gpu.reindex(eager + compiled).notna().all():
        out["fast.probe_compiled_stages_over_eager"] = gpu[compiled].sum() / gpu[eager].sum()
    if {"batch, 1 stream", "batch, 3 streams"} <= set(ms.index):
        out["fast.probe_1_over_3_streams"] = ms["batch, 1 stream"] / ms["batch, 3 streams"]
    return {k: float(v) for k, v in out.items() if not math.isnan(float(v))}


def probe_facts(probes: dict) -> list[dict]:
    """Each of :data:`PROBE_FACTS`, the least favourable over the probes that give it."""
    values = {name: probe_values(probe) for name, probe in probes.items()}
    rows = []
    for key, (unit, worst) in PROBE_FACTS.items():
        have = {name: v[key] for name, v in values.items() if key in v}
        if have:
            rows.append(fact(key, worst(have.values()), unit, datasets=tuple(have)))
    return rows

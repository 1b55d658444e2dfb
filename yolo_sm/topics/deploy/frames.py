"""Frames to boxes (notebook 10): the pipeline rows of the bench tables (``yolo_sm.core.bench``)
and the pipeline probe, as tables and as the facts the pipeline findings are decided on (keys
``fast.*``). Every function takes tables and returns a table or facts; none
judges.

Two benches hold pipeline rows: ``bench_fast_engines`` (the pipeline around one CUDA graph) and
``bench_pipeline`` (around torch.compile's engine). Each ratio is taken inside one (width,
batch) unit of one table, whose rows ran one after another in one process.
"""

from __future__ import annotations

import math

from yolo_sm.analyse.bench_table import (
    PIPELINE,
    PREDICT,
    ok_rows,
)
from yolo_sm.analyse.facts import fact
from yolo_sm.contract.vocab import PIPELINE_MODES, PIPELINE_STAGES

#: the bench of the pipeline around the compiled engine (its own plan step)
PIPELINE_DATASET = "bench_pipeline"
#: the benches that hold pipeline rows, the fast-engines bench first
PIPELINE_DATASETS = ("bench_fast_engines", PIPELINE_DATASET)
#: the reference plan's first pipeline probe (each stage of one batch alone), named where a
#: root holds none; the findings read every probe of a root (dataset role ``probe``)
PROBE = "probe_pipeline_w05_b16"


def pipeline_table(bench):
    """Per (width, batch) and pipeline row: frames/s, p50 / p99 latency, jitter (p99 - p50),
    the engine's model-only img/s and the ratio, the pipeline over YOLO.predict, and where the
    table has them the candidates NMS saw and the boxes it kept per frame."""
    ok = ok_rows(bench)
    pipe = ok[ok["variant"].str.startswith(PIPELINE)]
    pred = ok[ok["variant"] == PREDICT].set_index(["width", "batch"])
    key = pipe.set_index(["width", "batch"]).index
    return (
        pipe.assign(
            jitter_ms=pipe["p99_ms"] - pipe["median_ms"],
            predict_img_per_s=pred["img_per_s"].reindex(key).to_numpy(),
            predict_p99_ms=pred["p99_ms"].reindex(key).to_numpy(),
        )
        .assign(vs_predict=lambda d: d["img_per_s"] / d["predict_img_per_s"])[
            [
                "width",
                "batch",
                "variant",
                "streams",
                "img_per_s",
                "median_ms",
                "p99_ms",
                "jitter_ms",
                "model_only_img_per_s",
                "pipeline_vs_model_only",
                "predict_img_per_s",
                "vs_predict",
            ]
            # the mode, and NMS's work per frame, in rows measured since the pipeline has them
            + [c for c in ("pipeline_mode", "candidates_per_frame", "boxes_per_frame") if c in pipe]
        ]
        .sort_values(["width", "batch", "streams"])
        .reset_index(drop=True)
    )


def pipeline_facts(tables: dict) -> list[dict]:
    """The median over every pipeline row of ``tables`` (dataset name -> bench table) of the
    pipeline's frames/s over YOLO.predict's of the same unit
    (``fast.pipeline_over_predict_median``); none without such rows."""
    import pandas as pd

    every = [pipeline_table(t)["vs_predict"] for t in tables.values()]
    every = pd.concat(every) if every else pd.Series(dtype=float)
    if not every.notna().any():
        return []
    return [fact("fast.pipeline_over_predict_median", every.median(), "x", datasets=tuple(tables))]


def mode_table(bench):
    """Per (width, batch) of a bench's pipeline rows: the most frames/s of each pipeline mode
    it ran (a column per mode, :data:`yolo_sm.contract.vocab.PIPELINE_MODES` order; rows
    measured before the modes are ``full``) over its stream counts, and each other mode over
    ``full`` (``<mode>_over_full``; above 1: faster). Every ratio is within one unit: one
    process, one engine instance."""
    import pandas as pd

    pipe = pipeline_table(bench)
    if pipe.empty:
        return pd.DataFrame(columns=["width", "batch"])
    pipe = pipe.assign(
        mode=pipe["pipeline_mode"].fillna("full") if "pipeline_mode" in pipe else "full"
    )
    best = pipe.pivot_table(
        index=["width", "batch"], columns="mode", values="img_per_s", aggfunc="max"
    ).reindex(columns=[m for m in PIPELINE_MODES if m in set(pipe["mode"])])
    best.columns.name = None
    if "full" in best:
        for m in best.columns.drop("full"):
            best[f"{m}_over_full"] = best[m] / best["full"]
    return best.reset_index()


def mode_facts(tables: dict) -> list[dict]:
    """Over every unit of ``tables`` (dataset name -> bench table) that ran the full and the
    graph pipeline: the graph pipeline's frames/s over the full one's, the least
    (``fast.pipeline_graph_over_full_min``) and the median (``_median``)."""
    import pandas as pd

    ratios, names = [], []
    for name, t in tables.items():
        m = mode_table(t)
        if "graph_over_full" in m and m["graph_over_full"].notna().any():
            ratios.append(m["graph_over_full"].dropna())
            names.append(name)
    if not ratios:
        return []
    r = pd.concat(ratios)
    d = tuple(names)
    return [
        fact("fast.pipeline_graph_over_full_min", r.min(), "x", datasets=d),
        fact("fast.pipeline_graph_over_full_median", r.median(), "x", datasets=d),
    ]


def jitter(bench):
    """Latency jitter of each multi-stream pipeline row against the one-stream row of the same
    (family, width, batch, engine): jitter = p99 - p50 of the per-batch latency (submission of
    a batch's frames to its boxes on the host); ``reduction`` = 1 - multi / single."""
    import pandas as pd

    ok = ok_rows(bench)
    pipe = ok[ok["variant"].str.startswith(PIPELINE)].copy()
    if pipe.empty or "streams" not in pipe:
        return pd.DataFrame(
            columns=["width", "batch", "engine", "streams", "jitter_1_ms", "jitter_ms", "reduction"]
        )
    pipe["engine"] = pipe["variant"].str.rsplit("/", n=1).str[0]
    pipe["jitter_ms"] = pipe["p99_ms"] - pipe["median_ms"]
    keys = ["family", "width", "batch", "engine"]
    single = pipe[pipe["streams"] == 1].set_index(keys)["jitter_ms"].rename("jitter_1_ms")
    multi = pipe[pipe["streams"] >= 2].join(single, on=keys, how="inner")
    multi = multi.assign(reduction=1 - multi["jitter_ms"] / multi["jitter_1_ms"])
    return multi[
        ["width", "batch", "engine", "streams", "jitter_1_ms", "jitter_ms", "reduction"]
    ].reset_index(drop=True)


def pipeline_stages(probe):
    """The pipeline probe (kind ``probe``, :mod:`yolo_sm.topics.deploy.collect_probe`) as a table:
    per
    stage its
    median GPU and wall time and its wall time as a share of one batch through the 1-stream
    pipeline; the whole-batch rows carry that share too (3 streams: below 1 where batches
    overlap)."""
    cols = ["stage", "gpu_ms", "wall_ms"]
    out = probe[cols + (["same_result"] if "same_result" in probe else [])].copy()
    one = probe.loc[probe.stage == "batch, 1 stream", "wall_ms"]
    out["share_of_1_stream_batch"] = out["wall_ms"] / float(one.iloc[0]) if len(one) else None
    return out.reset_index(drop=True)


def probe_stages(probes: dict):
    """:func:`pipeline_stages` of several probes (dataset name -> probe table) in one table,
    each block of rows led by its probe's ``width`` and ``batch`` (from its rows), blocks in
    width then batch order."""
    import pandas as pd

    blocks = []
    for probe in probes.values():
        first = probe.iloc[0] if len(probe) else {}
        blocks.append(
            pipeline_stages(probe).assign(width=first.get("width"), batch=first.get("batch"))
        )
    if not blocks:
        return pd.DataFrame(columns=["width", "batch", "stage", "gpu_ms", "wall_ms"])
    out = pd.concat(blocks, ignore_index=True)
    out = out[["width", "batch", *[c for c in out.columns if c not in ("width", "batch")]]]
    return out.sort_values(["width", "batch"], kind="stable").reset_index(drop=True)


#: the probe facts and how :func:`probe_facts` takes them over several probes: the value
#: least favourable to its finding (the findings hold for every probe or not at all)
PROBE_FACTS = {
    "fast.probe_engine_share_pct": ("%", min),
    "fast.probe_compiled_stages_over_eager": ("x", max),
    "fast.probe_1_over_3_streams": ("x", min),
}


def probe_values(probe) -> dict[str, float]:
    """One probe's values of :data:`PROBE_FACTS`: the engine's share (%) of the five stages'
    summed wall time, the letterbox and decode compiled over eager in GPU time (where the probe
    ran them both ways), and one stream's time per batch over three streams' (above 1: batches
    overlap); a value the probe cannot give is left out."""
    by_stage = probe.set_index("stage")
    ms = by_stage["wall_ms"]
    out = {}
    stages = ms.reindex(list(PIPELINE_STAGES))
    if stages.notna().all() and "engine" in ms:
        out["fast.probe_engine_share_pct"] = ms["engine"] / stages.sum() * 100
    eager, compiled = ("letterbox", "decode"), ("letterbox: compiled", "decode: compiled")
    gpu = by_stage["gpu_ms"]
    if set(eager + compiled) <= set(gpu.index) and gpu.reindex(eager + compiled).notna().all():
        out["fast.probe_compiled_stages_over_eager"] = (
            gpu[list(compiled)].sum() / gpu[list(eager)].sum()
        )
    if {"batch, 1 stream", "batch, 3 streams"} <= set(ms.index):
        out["fast.probe_1_over_3_streams"] = ms["batch, 1 stream"] / ms["batch, 3 streams"]
    return {k: float(v) for k, v in out.items() if not math.isnan(float(v))}


def probe_facts(probes: dict) -> list[dict]:
    """Facts of every pipeline probe (dataset name -> probe table): each of
    :data:`PROBE_FACTS` over the probes that give it (:func:`probe_values`), the least
    favourable one, with the names of those probes as its datasets."""
    values = {name: probe_values(probe) for name, probe in probes.items()}
    rows = []
    for key, (unit, worst) in PROBE_FACTS.items():
        have = {name: v[key] for name, v in values.items() if key in v}
        if have:
            rows.append(fact(key, worst(have.values()), unit, datasets=tuple(have)))
    return rows

"""Frames to boxes (notebook 10): the pipeline rows of the bench tables (``yolo_sm.collect.bench``)
and the pipeline probe, as tables and as the facts speed goal 1 and the pipeline findings are
decided on (keys ``fast.*``). Every function takes tables and returns a table or facts; none
judges.

Two benches hold pipeline rows: ``bench_fast_engines`` (the pipeline around one CUDA graph) and
``bench_pipeline`` (around torch.compile's engine). Each ratio is taken inside one (width,
batch) unit of one table, whose rows ran one after another in one process; across the tables
only the choice of the best ratio per unit is made (:func:`fastest_pipelines`). A pipeline
that the host's CPU bounds (small batches: launches, NMS's host syncs) keeps a ratio that moves
with that CPU between runs, so at such units the choice is only as good as the two runs' hosts
are alike.
"""

from __future__ import annotations

import math

from yolo_sm.analyse.bench_table import (
    PIPELINE,
    PREDICT,
    engines,
    ok_rows,
    pipeline_engine,
    scope,
)
from yolo_sm.analyse.facts import fact
from yolo_sm.contract.vocab import PIPELINE_MODES, PIPELINE_STAGES

#: the bench of the pipeline around the compiled engine (its own plan step)
PIPELINE_DATASET = "bench_pipeline"
#: the benches whose pipeline rows speed goal 1 reads, the fast-engines bench first
PIPELINE_DATASETS = ("bench_fast_engines", PIPELINE_DATASET)
#: the reference plan's first pipeline probe (each stage of one batch alone), named where a
#: root holds none; the findings read every probe of a root (dataset role ``probe``)
PROBE = "probe_pipeline_w05_b16"

#: the columns of :func:`pipeline_gap`
GAP_COLUMNS = (
    "width", "batch", "pipeline", "frames_per_s", "own_engine", "own_img_per_s",
    "fastest_engine", "fastest_img_per_s", "pipeline_over_own", "own_over_fastest",
    "pipeline_over_fastest", "predict_img_per_s", "pipeline_over_predict",
    "candidates_per_frame",
)  # fmt: skip


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


def pipeline_gap(bench):
    """Speed goal 1's ratio per (width, batch) with a pipeline row, as its two measured
    factors: the fastest pipeline row (``pipeline``, ``frames_per_s``), the engine it wraps
    with its model-only img/s as the pipeline measured it just before (``own_engine``,
    ``own_img_per_s``), the fastest ok model-only engine of the unit (``fastest_engine``,
    ``fastest_img_per_s``; the baseline included) and the ratios ``pipeline_over_own`` (what
    the copies, letterbox, decode and NMS cost around that engine) x ``own_over_fastest``
    (which engine the pipeline wraps) = ``pipeline_over_fastest``; the pipeline over
    YOLO.predict of the same unit (``pipeline_over_predict``, empty without a predict row);
    with the NMS candidates per frame where the table counts them. A unit whose
    ``own_over_fastest`` is under the goal's threshold cannot meet it whatever the pre- and
    post-processing cost. A ``graph``-mode row replays its engine's forward inside its own
    CUDA graph, and its ``own_img_per_s`` is that forward replayed in a graph (the bench's
    ``model_only_img_per_s``), which can outrun every engine row of the unit
    (``own_over_fastest`` above 1). The product of the two factors, the goal's ratio, does not
    depend on it."""
    import pandas as pd

    pipe = pipeline_table(bench)  # each pipeline row with YOLO.predict of its unit
    model = engines(bench, baseline=True)
    rows = []
    for (w, b), g in pipe.groupby(["width", "batch"]):
        m = model[(model["width"] == w) & (model["batch"] == b)]
        if m.empty:
            continue
        p, f = g.loc[g["img_per_s"].idxmax()], m.loc[m["img_per_s"].idxmax()]
        own = float(p.get("model_only_img_per_s", float("nan")))
        rows.append(
            {
                "width": w,
                "batch": b,
                "pipeline": p["variant"],
                "frames_per_s": float(p["img_per_s"]),
                "own_engine": pipeline_engine(p["variant"]),
                "own_img_per_s": own,
                "fastest_engine": f["variant"],
                "fastest_img_per_s": float(f["img_per_s"]),
                "pipeline_over_own": float(p["img_per_s"]) / own,
                "own_over_fastest": own / float(f["img_per_s"]),
                "pipeline_over_fastest": float(p["img_per_s"]) / float(f["img_per_s"]),
                "predict_img_per_s": float(p["predict_img_per_s"]),
                "pipeline_over_predict": float(p["vs_predict"]),
                "candidates_per_frame": p.get("candidates_per_frame", float("nan")),
            }
        )
    return pd.DataFrame(rows, columns=list(GAP_COLUMNS))


def stage_budget(gap, target: float):
    """A :func:`pipeline_gap` (or :func:`fastest_pipelines`) table with three columns in ms
    per batch: ``stages_ms``, what the pipeline spends beyond its own engine's forward
    (batch / frames_per_s - batch / own_img_per_s: the copies, letterbox, decode and NMS that
    the batches in flight do not hide); ``stages_allowed_ms``, what a pipeline at ``target``
    x the fastest engine's img/s may spend beyond that forward (negative: the engine alone is
    too slow); ``stages_over_ms``, their difference (above 0: the ms per batch to cut for the
    ratio to reach ``target``)."""
    batch = gap["batch"].astype(float)
    own_ms = 1e3 * batch / gap["own_img_per_s"]
    stages = 1e3 * batch / gap["frames_per_s"] - own_ms
    allowed = 1e3 * batch / (target * gap["fastest_img_per_s"]) - own_ms
    return gap.assign(stages_ms=stages, stages_allowed_ms=allowed, stages_over_ms=stages - allowed)


def fastest_pipelines(tables: dict):
    """Per (width, batch): the :func:`pipeline_gap` row with the highest
    ``pipeline_over_fastest`` among ``tables`` (dataset name -> bench table), with the
    ``dataset`` it comes from (first column). Each row's ratios stay those of one table's
    unit, one process; tables without pipeline rows add nothing."""
    import pandas as pd

    gaps = [pipeline_gap(t).assign(dataset=name) for name, t in tables.items()]
    gaps = [g for g in gaps if not g.empty]
    cols = ["dataset", *GAP_COLUMNS]
    if not gaps:
        return pd.DataFrame(columns=cols)
    both = pd.concat(gaps, ignore_index=True)
    best = both.loc[both.groupby(["width", "batch"])["pipeline_over_fastest"].idxmax()]
    return best[cols].sort_values(["width", "batch"]).reset_index(drop=True)


def gap_facts(gap, datasets=()) -> list[dict]:
    """Facts of a :func:`pipeline_gap` (or :func:`fastest_pipelines`) table over its units
    (none when it is empty): ``fast.pipeline_engine_over_fastest_max`` / ``_median`` (the
    engine the pipeline wraps over the unit's fastest engine: the most, and the median) and
    ``fast.pipeline_over_own_engine_median`` (the pipeline over its own engine)."""
    if gap.empty:
        return []
    own, pipe = gap["own_over_fastest"], gap["pipeline_over_own"]
    return [
        fact("fast.pipeline_engine_over_fastest_max", own.max(), "x", datasets=datasets),
        fact("fast.pipeline_engine_over_fastest_median", own.median(), "x", datasets=datasets),
        fact("fast.pipeline_over_own_engine_median", pipe.median(), "x", datasets=datasets),
    ]


def pipeline_facts(tables: dict) -> list[dict]:
    """The pipeline facts of ``tables`` (dataset name -> bench table): per (width, batch) the
    fastest pipeline (:func:`fastest_pipelines`) over YOLO.predict (``fast.pipeline_over_predict``),
    over the engine it wraps (``fast.pipeline_over_model_only``) and over the fastest engine
    (``fast.pipeline_over_fastest_model_only``), each from one table; the factors of those
    ratios (:func:`gap_facts`); the median over every pipeline row of every table of the
    pipeline over YOLO.predict (``fast.pipeline_over_predict_median``)."""
    import pandas as pd

    best = fastest_pipelines(tables)
    rows = []
    for r in best.itertuples(index=False):
        s, d, note = scope(r.width, r.batch), (r.dataset,), r.pipeline
        for key, v in (
            ("fast.pipeline_over_predict", r.pipeline_over_predict),
            ("fast.pipeline_over_model_only", r.pipeline_over_own),
            ("fast.pipeline_over_fastest_model_only", r.pipeline_over_fastest),
        ):
            rows.append(fact(key, v, "x", scope=s, datasets=d, note=note))
    rows += gap_facts(best, tuple(dict.fromkeys(best["dataset"])))
    every = [pipeline_table(t)["vs_predict"] for t in tables.values()]
    every = pd.concat(every) if every else pd.Series(dtype=float)
    if every.notna().any():
        rows.append(
            fact(
                "fast.pipeline_over_predict_median",
                every.median(),
                "x",
                datasets=tuple(tables),
            )
        )
    return rows


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
    """The pipeline probe (kind ``probe``, :mod:`yolo_sm.collect.probe`) as a table: per stage its
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

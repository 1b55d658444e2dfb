"""What holds the frames-to-boxes pipeline below the fastest engine (speed goal 1), from a
bench table: the goal's ratio, the pipeline's frames/s over the fastest model-only engine of
the same model and batch, is the product of two measured factors,

- ``pipeline_over_own``: the pipeline over the model-only img/s of the engine it wraps (what
  the copies, letterbox, decode and NMS around that engine cost), and
- ``own_over_fastest``: that engine over the fastest engine of the unit (which engine the
  pipeline wraps),

so a unit whose ``own_over_fastest`` is under the goal's threshold cannot meet it whatever the
pre- and post-processing cost."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.fast import engines, ok_rows
from yolo_sm.contract.datasets import DataRoot

BENCH = "bench_fast_engines"
#: the prefix of pipeline variants (``pipeline/<engine>/s<streams>``)
PIPELINE = "pipeline/"

GAP_COLUMNS = (
    "width", "batch", "pipeline", "frames_per_s", "own_engine", "own_img_per_s",
    "fastest_engine", "fastest_img_per_s", "pipeline_over_own", "own_over_fastest",
    "pipeline_over_fastest", "candidates_per_frame",
)  # fmt: skip


def pipeline_gap(bench: pd.DataFrame) -> pd.DataFrame:
    """Per (width, batch) with a pipeline row: the fastest pipeline row (``pipeline``,
    ``frames_per_s``), the engine it wraps with its model-only img/s as the pipeline measured
    it just before (``own_engine``, ``own_img_per_s``), the fastest model-only engine of the
    unit (``fastest_engine``, ``fastest_img_per_s``; the baseline included) and the ratios
    ``pipeline_over_own`` x ``own_over_fastest`` = ``pipeline_over_fastest``; with the NMS
    candidates per frame where the table counts them."""
    ok = ok_rows(bench)
    pipe = ok[ok["variant"].str.startswith(PIPELINE)]
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
                "own_engine": p["variant"].removeprefix(PIPELINE).rsplit("/", 1)[0],
                "own_img_per_s": own,
                "fastest_engine": f["variant"],
                "fastest_img_per_s": float(f["img_per_s"]),
                "pipeline_over_own": float(p["img_per_s"]) / own,
                "own_over_fastest": own / float(f["img_per_s"]),
                "pipeline_over_fastest": float(p["img_per_s"]) / float(f["img_per_s"]),
                "candidates_per_frame": p.get("candidates_per_frame", float("nan")),
            }
        )
    return pd.DataFrame(rows, columns=list(GAP_COLUMNS))


def facts(root: DataRoot) -> pd.DataFrame:
    """:func:`gap_facts` of ``root``'s fast-engines bench (none without it)."""
    if not root.has(BENCH):
        return facts_table([])
    return gap_facts(pipeline_gap(root.load(BENCH)), (f"{root.name}/{BENCH}",))


def gap_facts(gap: pd.DataFrame, datasets=()) -> pd.DataFrame:
    """Facts of a :func:`pipeline_gap` table (none when it is empty), over its units:
    ``fast.pipeline_engine_over_fastest_max`` / ``_median`` (the engine the pipeline wraps over
    the unit's fastest engine: the most, and the median) and
    ``fast.pipeline_over_own_engine_median`` (the pipeline over its own engine)."""
    if gap.empty:
        return facts_table([])
    own, pipe = gap["own_over_fastest"], gap["pipeline_over_own"]
    return facts_table(
        [
            fact("fast.pipeline_engine_over_fastest_max", own.max(), "x", datasets=datasets),
            fact("fast.pipeline_engine_over_fastest_median", own.median(), "x", datasets=datasets),
            fact("fast.pipeline_over_own_engine_median", pipe.median(), "x", datasets=datasets),
        ]
    )

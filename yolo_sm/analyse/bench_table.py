"""The rows of a bench table (``yolo_sm.core.bench``, kind ``bench``) every analysis of it
selects the same way: the variants' names, the rows that ran, the model-only engines, the
units that hold every engine their plan step names, and the scope label of a per-(width,
batch) fact."""

from __future__ import annotations

from typing import TYPE_CHECKING

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.vocab import PIPELINE_MODES

if TYPE_CHECKING:
    import pandas as pd

#: the variant every engine of a unit is held against
BASELINE = "eager/fp16/nhwc"
PREDICT = "ultralytics_predict"
#: the prefix of pipeline variants (``pipeline/<engine>[/<mode>]/s<streams>``)
PIPELINE = "pipeline/"
EIGHT_BIT = ("fp8", "int8")


def pipeline_engine(variant: str) -> str:
    """The engine variant a pipeline variant wraps: ``pipeline/compile/fp16/nhwc/graph/s3`` ->
    ``compile/fp16/nhwc``."""
    parts = variant.removeprefix(PIPELINE).split("/")[:-1]  # the streams last
    return "/".join(parts[:-1] if parts and parts[-1] in PIPELINE_MODES else parts)


def ok_rows(df):
    """The rows of a measured table (a bench's, a sweep's) whose ``status`` is ``ok``: those
    that ran (all rows of a table without a status)."""
    return df[df["status"] == "ok"] if "status" in df else df


def engines(bench, baseline: bool = False):
    """ok model-only rows (without the baseline unless asked)."""
    e = ok_rows(bench)
    e = e[e["scope"] == "model_only"]
    return e if baseline else e[e["variant"] != BASELINE]


def variant_order(bench) -> list[str]:
    return list(dict.fromkeys(bench["variant"]))


def scope(width: float, batch: int) -> str:
    """The scope of a per-(width, batch) fact: ``"width=0.5, batch=16"``."""
    return f"width={float(width):g}, batch={int(batch)}"


def unit_of(text: str) -> tuple[float, int] | None:
    """The (width, batch) a :func:`scope` names; None for any other scope."""
    parts = dict(p.split("=", 1) for p in text.split(", ") if "=" in p)
    if set(parts) != {"width", "batch"}:
        return None
    try:
        return float(parts["width"]), int(parts["batch"])
    except ValueError:
        return None


def planned_engines(root: DataRoot, dataset: str) -> tuple[str, ...]:
    """The engines the plan step of ``root``'s bench ``dataset`` names, from the params its
    manifest records (the last run's); none for a bench made without them."""
    params = root.info(dataset).get("params") or {}
    return tuple(dict.fromkeys(str(e) for e in params.get("engines") or ()))


def incomplete_units(rows: pd.DataFrame, engines) -> pd.DataFrame:
    """Per (width, batch) unit of ``rows`` (a bench's, or rows derived from it with ``width``,
    ``batch`` and ``variant``) that lacks a row of an engine in ``engines`` (an error row
    counts: the engine was tried), those engines (``missing``)."""
    import pandas as pd

    cols = ["width", "batch", "missing"]
    need = list(dict.fromkeys(engines))
    if rows.empty or not need:
        return pd.DataFrame(columns=cols)
    held = rows.groupby(["width", "batch"]).variant.agg(set)
    out = [
        {"width": w, "batch": b, "missing": ", ".join(e for e in need if e not in v)}
        for (w, b), v in held.items()
        if not set(need) <= v
    ]
    return pd.DataFrame(out, columns=cols)


def complete_units(rows: pd.DataFrame, engines) -> pd.DataFrame:
    """The rows of the units :func:`incomplete_units` does not name. A unit measured before an
    engine joined its plan step does not know its fastest engine, so no verdict on the fastest
    engine is decided there until the unit is measured again; no ``engines``: every unit."""
    import pandas as pd

    gaps = incomplete_units(rows, engines)
    if gaps.empty:
        return rows
    lacking = list(zip(gaps.width, gaps.batch, strict=True))
    return rows[~pd.MultiIndex.from_frame(rows[["width", "batch"]]).isin(lacking)]


def complete_bench(root: DataRoot, dataset: str) -> pd.DataFrame:
    """``root``'s bench ``dataset``, its units that lack an engine of its plan step left out
    (:func:`complete_units`)."""
    return complete_units(root.load(dataset), planned_engines(root, dataset))

"""How every analysis selects the rows of a bench table (``yolo_sm.core.bench``)."""

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
    """The rows with ``status`` ok (all rows of a table without a status)."""
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


def complete_bench(root: DataRoot, dataset: str) -> pd.DataFrame:
    """``root``'s bench ``dataset`` less its (width, batch) units that lack a row (an error row
    counts) of an engine its plan step names: such a unit does not know its fastest engine."""
    import pandas as pd

    rows = root.load(dataset)
    need = set((root.info(dataset).get("params") or {}).get("engines") or ())
    if rows.empty or not need:
        return rows
    held = rows.groupby(["width", "batch"]).variant.agg(set)
    lacking = [unit for unit, v in held.items() if not {str(e) for e in need} <= v]
    return rows[~pd.MultiIndex.from_frame(rows[["width", "batch"]]).isin(lacking)]


def load_present(root: DataRoot, names, tag: str = "dataset"):
    """The datasets of ``names`` the root holds, concatenated with their name in column ``tag``
    (None when it holds none); ``attrs["datasets"]`` names them."""
    import pandas as pd

    have = [n for n in names if root.has(n)]
    if not have:
        return None
    out = pd.concat([root.load(n).assign(**{tag: n}) for n in have], ignore_index=True)
    out.attrs = {"datasets": have}
    return out

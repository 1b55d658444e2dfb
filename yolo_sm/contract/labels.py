"""Config labels: ``yolov8_w1.5_fp16_nhwc_b8`` names one (family, width, precision, layout,
batch) of a profiling run, in NVTX ranges, ncu tables and traces."""

from __future__ import annotations

import math
import re

from yolo_sm.contract.errors import UserError


def config_label(family, width, precision, layout, batch) -> str:
    return f"{family}_w{width:g}_{precision}_{layout}_b{batch}"


CONFIG_LABEL = re.compile(
    r"(?P<family>[a-z0-9][a-z0-9-]*?)_w(?P<width>[0-9]+(?:\.[0-9]+)?|\.[0-9]+)_(?P<precision>[a-z0-9]+)_"
    r"(?P<layout>nchw|nhwc)_b(?P<batch>[0-9]{1,9})"
)


def parse_config(label: str, strict: bool = True) -> dict:
    """The inverse of :func:`config_label`; another form raises UserError, or with
    ``strict=False`` gives None / NaN fields (the empty label of an idle GPM phase)."""
    m = CONFIG_LABEL.fullmatch(label) if isinstance(label, str) else None
    if m:
        d = m.groupdict()
        return {**d, "width": float(d["width"]), "batch": int(d["batch"])}
    if strict:
        shown = repr(label) if len(repr(label)) <= 80 else repr(label)[:77] + "..."
        raise UserError(f"not a config label like yolov8_w1.5_fp16_nhwc_b8: {shown}")
    return {"family": None, "width": math.nan, "precision": None, "layout": None, "batch": math.nan}


def with_config(df, col: str = "config", strict: bool = False):
    """A copy of ``df`` with the fields :func:`parse_config` reads from ``col`` (replaced)."""
    import pandas as pd

    parsed = pd.DataFrame([parse_config(c, strict) for c in df[col]], index=df.index)
    return df.drop(columns=[c for c in parsed if c in df]).join(parsed)

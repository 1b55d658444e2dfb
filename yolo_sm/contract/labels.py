"""labels: split from collect.profiling.target."""

from __future__ import annotations

import math
import re


def config_label(family, width, precision, layout, batch) -> str:
    return f"{family}_w{width:g}_{precision}_{layout}_b{batch}"


CONFIG_LABEL = re.compile(
    r"^(?P<family>[a-z0-9][a-z0-9-]*?)_w(?P<width>[0-9.]+)_(?P<precision>[a-z0-9]+)_"
    r"(?P<layout>nchw|nhwc)_b(?P<batch>[0-9]+)$"
)


def parse_config(label: str, strict: bool = True) -> dict:
    """The inverse of :func:`config_label`: ``"yolov8_w1.5_fp16_nhwc_b8"`` -> family, width
    (float), precision, layout, batch (int). Another form raises ValueError, or with
    ``strict=False`` gives None / NaN fields (e.g. the empty label of an idle GPM phase)."""
    m = CONFIG_LABEL.match(str(label))
    if m:
        d = m.groupdict()
        return {**d, "width": float(d["width"]), "batch": int(d["batch"])}
    if strict:
        raise ValueError(f"not a config label like yolov8_w1.5_fp16_nhwc_b8: {label!r}")
    return {"family": None, "width": math.nan, "precision": None, "layout": None, "batch": math.nan}


def with_config(df, col: str = "config", strict: bool = False):
    """A copy of ``df`` with family, width, precision, layout and batch parsed from ``col``
    (replacing columns of those names)."""
    import pandas as pd

    parsed = pd.DataFrame([parse_config(c, strict) for c in df[col]], index=df.index)
    return df.drop(columns=[c for c in parsed if c in df]).join(parsed)

"""Tables as the notebooks show them (:func:`show`): numbers formatted (SI prefixes for bytes and
FLOPs, shares as %), headers in words with units, wrapped; text HTML-escaped, data unchanged;
dataset text made safe for Markdown cells (:func:`md`, :func:`code`)."""

from __future__ import annotations

import html
import math
import numbers
import re

import pandas as pd

#: Unit suffixes of column names and how the header writes them.
UNITS = (
    ("_per_s", "/s"), ("_ms", "ms"), ("_us", "µs"), ("_s", "s"), ("_pct", "%"),
    ("_pct_points", "points"), ("_bytes", ""), ("_mb", "MB"), ("_gb", "GB"), ("_gbps", "GB/s"),
    ("_tflops", "TFLOP/s"), ("_mhz", "MHz"),
)  # fmt: skip
#: Headers written out for columns whose name is not a word plus a unit.
HEADERS = {
    "img_per_s": "img/s", "median_ms": "median (ms)", "iqr_ms": "IQR (ms)", "p99_ms": "p99 (ms)",
    "tflops": "TFLOP/s", "vs_baseline": "× baseline", "peak_frac": "share of peak",
    "rel_err": "rel. error", "block_size": "threads / block", "grid_size": "grid (blocks)",
    "registers_per_thread": "registers / thread",
    "shared_mem_per_block_bytes": "shared mem / block",
    "theoretical_occupancy_pct": "theoretical occ. (%)",
    "achieved_occupancy_pct": "achieved occ. (%)",
    "theoretical_occupancy_tw_pct": "theoretical occ., time-weighted (%)",
    "achieved_occupancy_tw_pct": "achieved occ., time-weighted (%)", "kernel_class": "kernel class",
    "module_type": "layer type", "flops_per_img": "FLOPs / image", "peak_mem_bytes": "peak memory",
    "carveout_bytes": "carve-out",
}  # fmt: skip
SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str = "") -> str:
    """``value`` with an SI prefix and three significant digits: ``231 kB``, ``5.90 G``."""
    if _missing(value):
        return ""
    for div, p in SI:
        if abs(value) >= div:
            return f"{value / div:.3g} {p}{unit}".rstrip()
    return f"{value:.3g} {unit}".rstrip()


def kib(value: float) -> str:
    """Shared memory in KiB (the unit the hardware allocates it in): ``226 KiB``."""
    if _missing(value):
        return ""
    return f"{value / 1024:,.4g} KiB" if value else "0"


def number(value) -> str:
    """Integers with thousands separators, other numbers to four significant digits, booleans
    and text as they are, NaN empty."""
    if _missing(value):
        return ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{value:,}"
    v = float(value)
    if math.isnan(v) or math.isinf(v):
        return "" if math.isnan(v) else "∞" if v > 0 else "-∞"
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def header(col: str) -> str:
    """Column ``col``'s header: :data:`HEADERS`, else its name in words with its unit."""
    col = str(col)
    if col in HEADERS:
        return HEADERS[col]
    for suffix, unit in UNITS:
        if col.endswith(suffix) and len(col) > len(suffix):
            stem = col[: -len(suffix)].replace("_", " ")
            if suffix == "_per_s":
                return f"{stem}/s"
            return f"{stem} ({unit})" if unit else stem
    return col.replace("_", " ")


def formatter(col: str):
    """The cell formatter of column ``col``."""
    c = str(col)
    if c.endswith("_bytes") and ("shared_mem" in c or "carveout" in c):
        return lambda v: kib(v) if isinstance(v, numbers.Real) else str(v)
    if c.endswith("_bytes"):
        return lambda v: si(v, "B") if isinstance(v, numbers.Real) else str(v)
    if c.endswith("flops") and not c.endswith("tflops") or c.endswith("flops_per_img"):
        return lambda v: si(v, "FLOP") if isinstance(v, numbers.Real) else str(v)
    if c.endswith("_share") or c.endswith("_frac") or c in ("time_share", "launch_share"):
        return lambda v: (
            f"{100 * v:.1f} %" if isinstance(v, numbers.Real) and not math.isnan(v) else ""
        )
    return number


def show(df: pd.DataFrame, *, index: bool | None = None, caption: str | None = None, columns=()):
    """``df`` (its ``columns`` it holds, in order) as a formatted, narrow Styler; ``index``
    shown by default unless a RangeIndex."""
    if index is None:
        index = not isinstance(df.index, pd.RangeIndex)
    d = df[[c for c in columns if c in df]] if columns else df.copy()
    d.columns = [" · ".join(map(str, c)) if isinstance(c, tuple) else c for c in d.columns]
    d.index.names = [None if n is None else html.escape(str(n)) for n in d.index.names]
    fmt = {c: formatter(c) for c in d.columns}
    # every cell, row label, header and the caption is text from a dataset: HTML-escaped
    styler = d.style.format(fmt, na_rep="", escape="html")
    styler = styler.format_index(number, axis=0, escape="html")
    styler = styler.relabel_index([html.escape(header(c)) for c in d.columns], axis=1)
    if not index:
        styler = styler.hide(axis="index")
    styler = styler.set_table_styles(
        [
            {
                "selector": "th",
                "props": "white-space: normal; max-width: 9em; font-size: 0.85em;"
                " overflow-wrap: break-word;"  # whole words: a column is never narrower than one
                " text-align: right; vertical-align: bottom;",
            },
            # row labels (a variant such as cudagraph/fp16/nhwc) on one line, never cut
            {"selector": "th.row_heading", "props": "white-space: nowrap; max-width: none;"},
            {"selector": "td", "props": "font-size: 0.85em; padding: 2px 6px;"},
        ]
    )
    if caption:
        styler = styler.set_caption(html.escape(caption))
    return styler


def show_dict(mapping: dict, *, key: str = "what", value: str = "value"):
    """A mapping as a two-column table, values formatted."""
    rows = [{key: k.replace("_", " "), value: number(v)} for k, v in mapping.items()]
    return show(pd.DataFrame(rows))


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")  # inline syntax (HTML is escaped apart)
_MD_LEADING = re.compile(r"^(\d*)([#+\->.)])(?=\s|$)")  # a heading, list or quote opening


def md(value) -> str:
    """``value`` as literal Markdown text: HTML escaped, syntax characters backslashed, one line."""
    text = " ".join(str(value).split())
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=True))
    return _MD_LEADING.sub(r"\1\\\2", text)


def code(value) -> str:
    """``value`` as a Markdown code span (backticks and line breaks replaced)."""
    text = " ".join(str(value).split()).replace("`", "'")
    return f"`{text}`"

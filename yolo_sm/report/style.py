"""One visual vocabulary for every figure: :func:`finish` gives axis, legend and colour-bar titles
in words with units (:data:`LABELS`), the colours of :mod:`yolo_sm.report.colors`, and log axes
ticked at 1-2-5 per decade in full."""

from __future__ import annotations

import math
import re

from yolo_sm.report.colors import batch_color, category_color, width_color
from yolo_sm.report.tables import SI

#: Words with units for the column names the figures plot.
LABELS = {
    "img_per_s": "images per second", "frames_per_s": "frames per second",
    "median_ms": "latency per batch (ms)", "latency_ms": "latency per batch (ms)",
    "p99_ms": "p99 latency per batch (ms)", "iqr_ms": "interquartile range (ms)",
    "ms_per_forward": "GPU time per forward (ms)", "duration_us": "kernel time (µs)",
    "time_us": "kernel time (µs)", "time_share": "share of kernel time", "tflops": "TFLOP/s",
    "achieved_tflops": "achieved TFLOP/s", "achieved_gbps": "achieved GB/s",
    "gflops_per_img": "GFLOPs per image", "peak_mem_gb": "peak GPU memory (GB)",
    "peak_mem_bytes": "peak GPU memory (bytes)", "gb": "peak GPU memory (GB)",
    "activation_mb": "activation per image (MB, fp16)", "kernels": "kernels per forward",
    "pct": "percent", "ratio": "speed-up (latency ratio)", "speedup": "speed-up (latency ratio)",
    "vs_baseline": "speed-up over the baseline (img/s ratio)", "rel_err": "relative L2 error",
    "width": "width multiplier", "batch": "batch size", "grid_size": "grid size (blocks)",
    "waves_per_sm": "waves per SM", "intensity": "arithmetic intensity (FLOP/byte)",
    "achieved_occupancy_pct": "achieved occupancy (%)",
    "theoretical_occupancy_pct": "theoretical occupancy (%)",
    "occupancy_pct": "theoretical occupancy (%)", "tensor_pipe_pct": "tensor pipe active (%)",
    "sm_throughput_pct": "SM throughput (% of peak)",
    "dram_throughput_pct": "DRAM throughput (% of peak)", "sm_util_pct": "SM utilisation (%)",
    "utilisation_pct": "SM utilisation (%)", "module_type": "layer type", "nvtx_range": "forward",
    "config": "forward", "label": "layer", "variant": "engine", "what": "measured",
    "vary": "varied parameter", "w": "width multiplier", "family": "model family",
    # plain words: a facet title "precision=fp16" reads "precision fp16"
    **{w: w for w in "value layer part metric engine precision backend layout occupancy".split()},
    **{w: w for w in ("limiter", "bound", "count")},
}  # fmt: skip
#: A title that is a bare identifier: snake_case, or a known column name.
_IDENT = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)+")


def label(name: str) -> str:
    """Words with units for column ``name`` (an unknown identifier loses its underscores)."""
    if name in LABELS:
        return LABELS[name]
    return name.replace("_", " ") if _IDENT.fullmatch(name or "") else name


def is_bare(title) -> bool:
    """Whether an axis title is missing words: empty, or a bare column name."""
    if not title:
        return True
    return bool(_IDENT.fullmatch(title)) or (title in LABELS and LABELS[title] != title)


def axes(fig):
    lay = fig.layout
    return [(k, lay[k]) for k in lay.to_plotly_json() if re.fullmatch(r"[xy]axis\d*", k)]


def _set_color(t, colour: str) -> None:
    scatter = t.type in ("scatter", "scattergl")
    if (scatter and ("lines" in (t.mode or "") or not t.mode)) or t.type in ("box", "violin"):
        t.line.color = colour
    marked = scatter or t.type in ("bar", "box", "violin", "histogram")
    if marked and (isinstance(t.marker.color, str) or t.marker.color is None):
        t.marker.color = colour


def _scale_color(legend: str, name: str):
    scales = dict.fromkeys(("width", "width multiplier"), width_color)
    scale = {**scales, **dict.fromkeys(("batch", "batch size"), batch_color)}.get(legend)
    try:
        return scale(float(str(name).lstrip("wb"))) if scale else None
    except ValueError:
        return None


def _nice_ticks(lo: float, hi: float) -> list[float]:
    """Tick values at 1-2-5 of each decade in [lo, hi]; decades only past three decades."""
    if not (lo > 0 and hi > 0) or hi < lo:
        return []
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1,) if e1 - e0 > 3 else (1, 2, 5)
    ticks = [m * 10.0**e for e in range(e0, e1 + 1) for m in steps]
    inside = [t for t in ticks if lo / 1.001 <= t <= hi * 1.001]
    return inside if len(inside) >= 2 else [t for t in ticks if lo / 10 <= t <= hi * 10]


def tick_text(v: float) -> str:
    """A tick label: ``0.5``, ``20``, ``5,000``, ``2M`` (SI prefix from a million)."""
    for div, prefix in SI[:3]:
        if v >= div:
            return f"{v / div:g}{prefix}"
    return f"{v:,.0f}" if v >= 1000 else f"{v:g}"


def _values_on(fig, axis_key: str):
    """Every positive finite value the traces put on axis ``xaxis3`` / ``yaxis``."""
    import pandas as pd

    letter = axis_key[0]
    ref = letter + axis_key[5:]
    on = [
        getattr(t, letter, None)
        for t in fig.data
        if (getattr(t, f"{letter}axis", None) or letter) == ref
    ]
    v = pd.to_numeric(
        pd.Series([x for vals in on if vals is not None for x in vals]), errors="coerce"
    )
    return [float(x) for x in v[(v > 0) & (v < math.inf)]]


def readable_log_axes(fig):
    """Ticks at 1-2-5 per decade (or the data's powers of two: batch sizes), labelled in full,
    on every log axis of ``fig`` over its range (else the data's)."""
    for key, ax in axes(fig):
        if ax.type != "log" or ax.tickvals is not None:
            continue
        vals = _values_on(fig, key)
        if ax.range is not None:
            lo, hi = (10.0**r for r in ax.range)
        elif vals:
            lo, hi = min(vals), max(vals)
        else:
            continue
        twos = sorted(set(vals))
        powers = all(v.is_integer() and int(v) & (int(v) - 1) == 0 for v in twos)
        if 2 <= len(twos) <= 12 and powers:
            ticks = twos  # batch sizes: label the powers of two the data holds
        else:
            ticks = _nice_ticks(lo, hi)
        if ticks:
            ax.update(tickvals=ticks, ticktext=[tick_text(t) for t in ticks], minor_showgrid=False)
    return fig


def recolor(fig):
    """Traces named (or grouped) by a category key take its colour; those of a width or batch
    legend, the width or batch scale."""
    legend = (fig.layout.legend.title.text or "") if fig.layout.legend.title else ""
    for t in fig.data:
        colour = None
        for key in (t.legendgroup, t.name):
            if key:
                colour = category_color(str(key))
                if colour:
                    break
        if colour is None and t.name is not None:
            colour = _scale_color(legend, t.name)
        if colour:
            _set_color(t, colour)
    return fig


def relabel(fig):
    """Axis, legend and colour-bar titles that are bare column names become words."""
    for _, ax in axes(fig):
        text = ax.title.text if ax.title else None
        if text and is_bare(text):
            ax.title.text = label(text)
    lt = fig.layout.legend.title.text if fig.layout.legend.title else None
    if lt:
        fig.layout.legend.title.text = label(lt)
    for t in fig.data:
        cb = getattr(t, "colorbar", None)
        if cb is not None and cb.title and cb.title.text and is_bare(cb.title.text):
            cb.title.text = label(cb.title.text)
    for a in fig.layout.annotations or ():
        key, eq, val = (a.text or "").partition("=")
        if eq and (key in LABELS or _IDENT.fullmatch(key)):
            a.text = f"{label(key)} {val}"  # a facet title: "config=yolov8_w1..."
        elif a.text and _IDENT.fullmatch(a.text):
            a.text = label(a.text)
    return fig


def finish(fig, x: str | None = None, y: str | None = None):
    """``fig`` with axis titles ``x`` and ``y`` (None: its own), relabelled, recoloured, log axes
    ticked; returns it."""
    for update, title in ((fig.update_xaxes, x), (fig.update_yaxes, y)):
        if title is not None:
            update(title_text=title)
    return readable_log_axes(recolor(relabel(fig)))

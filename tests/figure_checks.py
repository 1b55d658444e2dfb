"""What breaks the figures' visual vocabulary (:mod:`yolo_sm.report.style`): the tests' check."""

from __future__ import annotations

from yolo_sm.report.colors import COLORS
from yolo_sm.report.style import axes, is_bare


def trace_color(t):
    colours = (getattr(getattr(t, a, None), "color", None) for a in ("line", "marker"))
    return next((c for c in colours if isinstance(c, str)), None)


def problems(fig) -> list[str]:
    """Bare column names as axis titles, untitled cartesian axes, and category traces in
    another colour than the mapping's."""
    out = []
    found = axes(fig)
    titles = {k: (ax.title.text if ax.title else None) for k, ax in found}
    for k, text in titles.items():
        if text and is_bare(text):
            out.append(f"{k} title {text!r} is a column name")
    cartesian = any(t.type not in ("pie", "sunburst", "table", "indicator") for t in fig.data)
    subplot_titles = [a.text for a in fig.layout.annotations or () if a.text]
    for letter in ("x", "y"):
        named = [t for k, t in titles.items() if k.startswith(letter) and t]
        if cartesian and found and not named and not (letter == "y" and subplot_titles):
            out.append(f"no {letter} axis has a title")
    for t in fig.data:
        want = None
        for key in (t.legendgroup, t.name):
            if key and str(key) in COLORS:
                want = COLORS[str(key)]
                break
        have = trace_color(t)
        if want and have and have.lower() != want.lower():
            out.append(f"trace {t.name!r} is {have}, the mapping says {want}")
    return out

"""The site's style sheet: ``site.css`` beside this module, and a badge class per verdict."""

import re
from importlib.resources import files

from yolo_sm.report.colors import VERDICT_COLORS


def verdict_class(verdict: str) -> str:
    """A verdict's badge class: ``does not hold`` -> ``verdict-does-not-hold``."""
    return "verdict-" + re.sub(r"[^a-z]+", "-", verdict.lower()).strip("-")


#: one badge class per verdict (:func:`verdict_class`), coloured by colors.VERDICT_COLORS
VERDICT_CSS = "".join(
    f".{verdict_class(v)} {{ background: {bg}; color: {fg}; }}\n"
    for v, (bg, fg) in VERDICT_COLORS.items()
)

#: ``site.css`` (a file of the package) and the verdict badges
SITE_STYLE = (files("yolo_sm.report") / "site.css").read_text(encoding="utf-8") + VERDICT_CSS

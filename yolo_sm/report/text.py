"""Dataset text made safe for Markdown cells: :func:`md` escapes, :func:`code` makes a code span."""

from __future__ import annotations

import html
import re

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

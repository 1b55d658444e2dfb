"""Text from datasets (provenance values, dataset and root names) made safe for a Markdown
cell, which the notebook and the rendered site turn into HTML: :func:`md` escapes HTML and
Markdown syntax, :func:`code` makes a code span that nothing can break out of."""

from __future__ import annotations

import html
import re

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")  # inline syntax (HTML is escaped apart)
_MD_LEADING = re.compile(r"^(\d*)([#+\->.)])(?=\s|$)")  # a heading, list or quote opening


def md(value) -> str:
    """``value`` as literal text inside Markdown: ``<``, ``>``, ``&`` and quotes as HTML
    entities, Markdown's syntax characters backslash-escaped, line breaks as spaces (a
    dataset string never opens a tag, a link, emphasis or a new block)."""
    text = " ".join(str(value).split())
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=True))
    return _MD_LEADING.sub(r"\1\\\2", text)


def code(value) -> str:
    """``value`` as a Markdown code span (rendered literally: no HTML inside one is live);
    backticks and line breaks, which could end the span, are replaced."""
    text = " ".join(str(value).split()).replace("`", "'")
    return f"`{text}`"

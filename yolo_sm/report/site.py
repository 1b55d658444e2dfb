"""The site's pages: nbconvert's JupyterLab page through :data:`TEMPLATE` (offline: the site holds
plotly.js and the style sheets once), a side bar, a key-results box, widget placeholders, and
folded code, long tables, long Markdown and repeated verdicts."""

from __future__ import annotations

import copy
import html
import re
import string
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from yolo_sm.report.colors import VERDICT_COLORS

HIDE_INPUT = "hide-input"
SETUP_TAGS = (HIDE_INPUT, "parameters", "injected-parameters")
PLOTLY_JS = "plotly.min.js"
NOTEBOOK_CSS = "notebook.css"
SITE_CSS = "site.css"
INDEX = "index.html"
#: output metadata key: fold the output under this summary line
FOLD = "yolo_site_fold"
#: fold tables of more rows, outputs stating this many rules, Markdown past this many characters
LONG_TABLE_ROWS = 4
MANY_VERDICTS = 3
LONG_MARKDOWN = 300
#: figure height (px) where the layout sets none, and the most a figure takes
FIGURE_PX, FIGURE_MAX_PX = 320, 560

_TOP, _BOTTOM = "<!--yolo-site:top-->", "<!--yolo-site:bottom-->"

#: nbconvert's lab page template: ``page.html.j2`` beside this module, its ``$NAMES`` (this
#: module's constants above) filled in
TEMPLATE = string.Template((files("yolo_sm.report") / "page.html.j2").read_text("utf-8"))
TEMPLATE = TEMPLATE.substitute(globals())

_REMOTE_SCRIPT = re.compile(r"<script\b[^>]*\bsrc=[\"'](?:https?:)?//[^>]*>\s*</script>", re.I)
_REMOTE_LINK = re.compile(r"<link\b[^>]*\bhref=[\"'](?:https?:)?//[^>]*>", re.I)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_PLACEHOLDER = (
    '<div class="yolo-widget">An interactive explorer stands here: it is interactive in '
    "JupyterLab only (<code>jupyter lab notebooks/</code>, see the index); the figures and "
    "tables around it show the same data on this page.</div>"
)
_PLOTLY_BUNDLE = re.compile(r"plotly\.js v\d")
_HEADING = re.compile(r'<h([23])\s+id="([^"]+)"[^>]*>(.*?)</h\1>', re.S)
_TAGS = re.compile(r"<[^>]+>")


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


@dataclass(frozen=True)
class Page:
    """One notebook of the site: file stem and first heading."""

    stem: str
    title: str

    file = property(lambda self: f"{self.stem}.html")
    number = property(lambda self: self.stem.split("_", 1)[0])
    topic = property(lambda self: self.stem.split("_", 1)[-1])
    heading = property(lambda self: _split_title(self.title)[0])  # the title's topic
    question = property(lambda self: _split_title(self.title)[1])  # after "topic: "


def _split_title(title: str) -> tuple[str, str]:
    head = re.sub(r"^\d+\s*[·.:-]\s*", "", title)
    topic, sep, question = head.partition(": ")
    return (topic, question) if sep else (head, "")


def title_of(nb) -> str:
    """The notebook's first Markdown heading ("" when none)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("# ").strip()
    return ""


def setup_cells(nb) -> list[int]:
    """Indices of set-up code cells: tagged :data:`SETUP_TAGS` or before the second markdown."""
    markdown = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
    preamble_end = markdown[1] if len(markdown) > 1 else len(nb.cells)
    return [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        and (i < preamble_end or set(SETUP_TAGS) & set(c.metadata.get("tags", [])))
    ]


def _is_plotly_bundle(output) -> bool:
    text = output.get("data", {}).get("text/html", "")
    text = "".join(text) if isinstance(text, list) else text
    return len(text) > 100_000 and bool(_PLOTLY_BUNDLE.search(text[:5000]))


def for_html(nb, shown: set[str] | None = None, statements: tuple[str, ...] = ()):
    """A copy of ``nb`` as the site renders it: plotly.js bundles dropped, widgets replaced,
    set-up cells merged, inputs and outputs folded, figure heights set."""
    nb = copy.deepcopy(nb)
    fold_outputs(nb, set(shown or ()), statements)
    nb.metadata.pop("widgets", None)
    folded = set(setup_cells(nb))
    cells, run = [], []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs = [_placeholder(o) for o in cell.outputs if not _is_plotly_bundle(o)]
            for o in cell.outputs:
                if "Plotly.newPlot" in o.get("data", {}).get("text/html", ""):
                    o.data["text/html"] = with_height(o.data["text/html"])
        if cell.cell_type == "markdown":
            cell.source = folded_markdown(cell.source)
        if i in folded:
            run.append(cell)
            continue
        if run:
            cells.append(_merged(run))
            run = []
        cells.append(cell)
    if run:
        cells.append(_merged(run))
    for cell in cells:  # the page shows what a cell found; its code is a click away
        tags = cell.metadata.setdefault("tags", [])
        if cell.cell_type == "code" and HIDE_INPUT not in tags:
            tags.append(HIDE_INPUT)
            cell.metadata["yolo_site_summary"] = "code"
    nb.cells = cells
    return nb


def folded_markdown(text: str) -> str:
    """Past :data:`LONG_MARKDOWN` characters, all but the first paragraph folded under "more"."""
    if len(text) <= LONG_MARKDOWN:
        return text
    blocks = text.split("\n\n")
    keep = 2 if blocks[0].lstrip().startswith("#") and len(blocks) > 2 else 1
    if len(blocks) <= keep:
        return text
    head, rest = "\n\n".join(blocks[:keep]), "\n\n".join(blocks[keep:])
    return f'{head}\n\n<details class="yolo-more"><summary>more</summary>\n\n{rest}\n\n</details>'


def _output_text(output) -> str:
    data = output.get("data", {})
    text = data.get("text/html") or data.get("text/markdown") or output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def fold_outputs(nb, shown: set[str], statements: tuple[str, ...]) -> None:
    """Mark outputs to fold (:data:`FOLD`): verdicts shown before, long tables, many verdicts."""
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else ():
            text = _output_text(output)
            if not text or len(text) > 1_000_000:
                continue
            plain = html.unescape(text)
            found = {s for s in statements if s in plain}
            rows = len(re.findall(r"<tr\b", text)) - len(re.findall(r"<thead\b", text))
            if found and found <= shown:
                fold = f"{len(found)} verdicts shown above on this page, again"
            elif rows > LONG_TABLE_ROWS:
                fold = f"a table of {rows} rows (click to show)"
                shown |= found
            elif len(found) >= MANY_VERDICTS:
                fold = f"{len(found)} verdicts of this page (click to show)"
                shown |= found
            else:
                shown |= found
                continue
            output.setdefault("metadata", {})[FOLD] = fold


_NEW_PLOT = re.compile(r'Plotly\.newPlot\(\s*"[^"]+",\s*')


def with_height(text: str) -> str:
    """A figure's HTML at :data:`FIGURE_PX` high by default, :data:`FIGURE_MAX_PX` at most."""
    import json

    dec, parts, at = json.JSONDecoder(), [], 0
    for m in _NEW_PLOT.finditer(text):
        if m.start() < at:
            continue
        _, end = dec.raw_decode(text, m.end())
        start = text.index("{", end)
        layout, stop = dec.raw_decode(text, start)
        height = min(layout.get("height", FIGURE_PX), FIGURE_MAX_PX)
        if layout.get("height") != height:
            # the figure's wrapper holds its layout's height as a style too
            before = text[at:start].replace(
                f'style="height:{layout.get("height")}px;', f'style="height:{height}px;'
            )
            parts += [before, json.dumps({**layout, "height": height})]
            at = stop
    return "".join(parts) + text[at:]


def _placeholder(output):
    if WIDGET_VIEW not in output.get("data", {}):
        return output
    import nbformat

    return nbformat.v4.new_output("display_data", data={"text/html": WIDGET_PLACEHOLDER})


def _merged(run: list):
    cell = copy.deepcopy(run[-1])
    cell.source = "\n\n".join(c.source for c in run)
    cell.outputs = [o for c in run for o in c.outputs]
    tags = list(dict.fromkeys(t for c in run for t in c.metadata.get("tags", [])))
    cell.metadata["tags"] = [*tags, HIDE_INPUT] if HIDE_INPUT not in tags else tags
    params = {"parameters", "injected-parameters"} & set(tags)
    cell.metadata["yolo_site_summary"] = "parameters and set-up code" if params else "set-up code"
    return cell


def exporter():
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(
        template_name="lab",
        extra_loaders=[DictLoader({"yolo_site.html.j2": TEMPLATE})],
        template_file="yolo_site.html.j2",
    )


def offline(text: str) -> str:
    return _REMOTE_LINK.sub("", _REMOTE_SCRIPT.sub("", text))


def headings(page_html_text: str) -> list[tuple[int, str, str]]:
    """(level, id, text) of the page's h2 and h3 headings, unescaped."""
    out = []
    for level, hid, inner in _HEADING.findall(page_html_text):
        inner = re.sub(r'<a class="anchor-link".*?</a>', "", inner, flags=re.S)
        text = html.unescape(_TAGS.sub("", inner)).strip()
        out.append((int(level), html.unescape(hid), text))
    return out


def toc_html(items: list[tuple[int, str, str]]) -> str:
    if not items:
        return ""
    lis = "\n".join(
        f'<li class="toc-h{level}"><a href="#{html.escape(hid, quote=True)}">'
        f"{html.escape(text)}</a></li>"
        for level, hid, text in items
    )
    return f'<nav class="yolo-toc" aria-label="contents"><h2>Contents</h2><ul>\n{lis}\n</ul></nav>'


def _link(rel: str, target: Page | None, arrow: str) -> str:
    if target is None:
        return f'<a rel="{rel}" href="{INDEX}">{arrow} index</a>'
    return (
        f'<a rel="{rel}" href="{html.escape(target.file)}" title="{html.escape(target.title)}">'
        f"{arrow} {html.escape(target.number)} · {html.escape(target.heading)}</a>"
    )


def nav_html(prev: Page | None, nxt: Page | None, where: str = "top") -> str:
    return (
        f'<nav class="yolo-nav yolo-nav-{where}" aria-label="site">'
        f"{_link('prev', prev, '←')}"
        f'<a rel="index" href="{INDEX}">↑ index</a>'
        f"{_link('next', nxt, '→')}</nav>"
    )


def page_html(
    nb,
    page: Page,
    prev: Page | None = None,
    nxt: Page | None = None,
    results=None,
    shown: set[str] | None = None,
    statements: tuple[str, ...] = (),
) -> str:
    """``nb`` as ``page`` linked to ``prev`` / ``nxt``, ``results(headings)`` under its title."""
    body, _ = exporter().from_notebook_node(
        for_html(nb, shown, statements), resources={"metadata": {"name": page.title or page.stem}}
    )
    body = offline(body)
    side = (
        '<aside class="yolo-side">'
        f'<p class="yolo-site-name"><a href="{INDEX}">yolo_sm</a></p>'
        f"{nav_html(prev, nxt)}{toc_html(headings(body))}</aside>"
    )
    body = body.replace(_TOP, side, 1)
    box = results(headings(body)) if results else ""
    body = re.sub(r"(</h1>)", lambda m: m.group(1) + box, body, count=1) if box else body
    return body.replace(_BOTTOM, nav_html(prev, nxt, "bottom"), 1)


def lab_css() -> str:
    """The JupyterLab template's index.css and light theme as one text."""
    from nbconvert import HTMLExporter

    static = [Path(p) / "static" for p in HTMLExporter(template_name="lab").template_paths]
    names = ("index.css", "theme-light.css")
    files = [next((d / n for d in static if (d / n).exists()), static[0] / n) for n in names]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def site_assets() -> dict:
    """File name -> body of the files every page links."""
    import plotly

    plotly_js = Path(plotly.__file__).parent / "package_data" / PLOTLY_JS
    return {PLOTLY_JS: plotly_js.read_bytes(), NOTEBOOK_CSS: lab_css(), SITE_CSS: SITE_STYLE}

"""What the site tests read from a rendered site (a page's title, links, fetched URLs and
ids) and :func:`check_site`, every check of a rendered site at once."""

from __future__ import annotations

import functools
import html
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pandas as pd

MAX_SITE_BYTES = 10 * 1024 * 1024
#: element -> the attributes through which a browser fetches something
FETCHING = {
    "script": ("src",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
}


class _Page(HTMLParser):
    """What the tests read from a page: title, links with their rel, fetched URLs, ids."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.title, self._in_title = "", False
        self.links: list[tuple[str, str]] = []  # (rel, href)
        self.fetched: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "title":
            self._in_title = True
        if tag == "a" and a.get("href"):
            self.links.append((a.get("rel") or "", a["href"]))
        for attr in FETCHING.get(tag, ()):
            if a.get(attr):
                self.fetched.append(a[attr])

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def read_page(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def remote(url: str) -> bool:
    return bool(re.match(r"^\s*(?:https?:)?//", url, re.I))


def notebook_title(path: Path) -> str:
    from yolo_sm.report.site import title_of

    return title_of(nbformat.read(path, as_version=4))


def check_site(site: Path, executed: dict, root) -> dict[str, str]:
    """Every check of the site rendered from ``executed`` (notebook path -> the executed
    notebook); returns file name -> page text."""
    from yolo_sm.report.site import WIDGET_PLACEHOLDER, Page

    notebooks = list(executed)

    files = [f"{p.stem}.html" for p in notebooks]
    texts = {f: (site / f).read_text(encoding="utf-8") for f in ["index.html", *files]}
    # the site under 10 MB, plotly.js in it once
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    assert size < MAX_SITE_BYTES, f"site is {size / 1e6:.1f} MB"
    assert (site / "plotly.min.js").stat().st_size > 1_000_000
    for i, (path, f) in enumerate(zip(notebooks, files, strict=True)):
        page, text = read_page(site / f), texts[f]
        assert page.title == notebook_title(path), f
        rels = {}
        for rel, href in page.links:
            rels.setdefault(rel, set()).add(href)
        prev = files[i - 1] if i else "index.html"
        nxt = files[i + 1] if i + 1 < len(files) else "index.html"
        assert rels.get("index") == {"index.html"}, f
        assert rels.get("prev") == {prev} and rels.get("next") == {nxt}, (f, rels)
        # contents: one link per second-level heading of the notebook, to an id on the page
        nb = nbformat.read(path, as_version=4)
        h2 = [
            ln[3:].strip()
            for c in nb.cells
            if c.cell_type == "markdown"
            for ln in c.source.splitlines()
            if ln.startswith("## ")
        ]
        toc = re.search(r'<nav class="yolo-toc".*?</nav>', text, re.S)
        assert toc or not h2, f
        targets = (
            [html.unescape(t) for t in re.findall(r'href="#([^"]+)"', toc.group(0))] if toc else []
        )
        assert len(targets) >= len(h2) and set(targets) <= page.ids, f
        # nothing from the network; figures draw with the site's one copy of plotly.js
        assert not [u for u in page.fetched if remote(u)], (f, page.fetched)
        assert "plotly.min.js" in page.fetched, f
        assert not re.search(r"plotly\.js v\d", text), f"{f} carries its own plotly.js"
        assert "application/vnd.jupyter.widget-view+json" not in text, f
        nb_widgets = sum(
            "application/vnd.jupyter.widget-view+json" in o.get("data", {})
            for c in executed[path].cells
            for o in c.get("outputs", [])
        )
        assert text.count(WIDGET_PLACEHOLDER) == nb_widgets, f
        # set-up code folded: the parameters cell sits in a closed <details>
        folds = re.findall(r'<details class="yolo-setup">(.*?)</details>', text, re.S)
        assert any("DATA" in fold for fold in folds), f
    for css in site.glob("*.css"):
        assert not re.search(r"url\(\s*[\"']?(?:https?:)?//", css.read_text()), css.name
    index = read_page(site / "index.html")
    assert not [u for u in index.fetched if remote(u)]
    assert {f for _, f in index.links} >= set(files)
    # the provenance table, read from the root's manifests
    prov = re.search(r'<table[^>]*id="provenance".*?</table>', texts["index.html"], re.S)
    assert prov, "no provenance table"
    m = root.machine()
    for key in ("gpu_name", "sm_count", "driver", "cuda", "torch", "ultralytics"):
        if m.get(key):
            assert f">{m[key]}<" in prov.group(0), key
    assert m["date_utc_last"][:10] in prov.group(0)
    # the key results: one row per page that decides rules, its verdicts from the rules
    verdicts = verdicts_of(root.name)
    table = re.search(r'<table[^>]*id="key-results".*?</table>', texts["index.html"], re.S)
    assert table, "no key-results table"
    rows = [r for r in re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S) if "<td" in r]
    pages = [Page(p.stem, notebook_title(p)) for p in notebooks]
    assert 1 <= len(rows) <= len(pages)
    for row in rows:
        statement = re.search(r'<td class="statement">(.*?)</td>', row, re.S).group(1)
        hit = verdicts[verdicts.statement.map(_esc) == statement]
        assert len(hit) == 1, statement
        assert f">{hit.verdict.iloc[0]}<" in row
    return texts


@functools.cache
def verdicts_of(name: str) -> pd.DataFrame:
    """The verdict table of the shipped root ``name`` (computed once per session)."""
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report import catalog

    return catalog.verdict_table(open_root(name))


def _esc(s: str) -> str:
    return html.escape(s)


def claims_sources(path: Path) -> list[str]:
    """The titles of the numbered, italic-titled sources in the notebook's first cell."""
    first = nbformat.read(path, as_version=4).cells[0].source
    return re.findall(r"^\s*\d+\.\s+\*([^*]+)\*", first, re.M)


def read_page_text(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


# --- how tall the pages are ---------------------------------------------------------------------

#: the limits at WIDTH_PX wide: each page, and the site in all
WIDTH_PX, PAGE_MAX_PX, SITE_MAX_PX = 1400, 12_000, 100_000
_MEASURE = (
    "<script>window.addEventListener('load', () => setTimeout(() => {"
    "const box = document.querySelector('.yolo-results');"
    "document.title = 'HEIGHT ' + document.documentElement.scrollHeight"
    " + ' TOP ' + (box ? Math.round(box.getBoundingClientRect().top) : -1)}, 300))</script>"
)


def browser() -> str | None:
    """A headless-capable Chromium on this machine, or None."""
    import shutil

    return next(
        (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
    )


def browser_heights(site: Path, files: list[str], width: int = WIDTH_PX) -> dict[str, tuple]:
    """file -> (the page's height, the top of its key-results box or -1) in px, once loaded
    and its figures drawn, in headless Chromium ``width`` px wide; each page measured through
    a copy beside it, all in one browser: each copy in a frame ``width`` x 1,000 px (the
    window of one page) of a page that collects their titles."""
    import json
    import subprocess

    frame = f'<iframe style="display:block;border:0;width:{width}px;height:1000px" src="{{}}">'
    collect = (
        "<script>const poll = () => { const t = [...document.querySelectorAll('iframe')]"
        ".map(f => (f.contentDocument && f.contentDocument.title) || '');"
        "if (t.every(x => x.startsWith('HEIGHT'))) document.title = 'ALL ' + JSON.stringify(t);"
        "else setTimeout(poll, 100) }; window.addEventListener('load', poll)</script>"
    )
    probes = [site / f".measure-{f}" for f in files]
    everything = site / ".measure-all.html"
    try:
        for f, probe in zip(files, probes, strict=True):
            probe.write_text((site / f).read_text(encoding="utf-8") + _MEASURE, encoding="utf-8")
        frames = "".join(frame.format(p.name) + "</iframe>" for p in probes)
        everything.write_text(f'<html><body style="margin:0">{frames}{collect}</body></html>')
        dom = subprocess.run(
            [
                browser(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--allow-file-access-from-files",  # the frames' titles, read by their parent
                f"--window-size={width},1000",
                f"--virtual-time-budget={8000 * len(files)}",
                "--dump-dom",
                everything.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120 + 10 * len(files),
            check=False,
        ).stdout
    finally:
        for p in (*probes, everything):
            p.unlink(missing_ok=True)
    m = re.search(r"<title>ALL (.*?)</title>", dom)
    assert m, f"no height measured for some of {files}"
    titles = json.loads(html.unescape(m.group(1)))
    found = [re.fullmatch(r"HEIGHT (\d+) TOP (-?\d+)", t) for t in titles]
    return {f: (int(t.group(1)), int(t.group(2))) for f, t in zip(files, found, strict=True)}


class _Height(HTMLParser):
    """:func:`estimated_height`'s reader."""

    BLOCKS = {"p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd", "summary", "caption"}
    SKIP = {"script", "style", "title", "head"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.px, self.chars, self.closed, self.skip, self.pre = 0.0, 0, 0, 0, 0

    def _line(self):
        if self.chars and not self.closed:
            self.px += 22 * -(-self.chars // 150)
        self.chars = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self.closed and tag == "details":
            self.closed += 1
        elif tag == "details" and "open" not in a:
            self._line()
            self.px += 24  # its summary line
            self.closed = 1
        if tag in self.SKIP:
            self.skip += 1
        if tag == "pre":
            self.pre += 1
        if tag in self.BLOCKS or tag in ("tr", "pre", "table", "div"):
            self._line()
        if self.closed:
            return
        if tag == "tr":
            self.px += 22

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skip -= 1
        if tag == "pre":
            self.pre -= 1
        if tag in self.BLOCKS or tag == "pre":
            self._line()
            self.px += 0 if self.closed else 10  # the block's margin
        if tag == "details" and self.closed:
            self.closed -= 1

    def handle_data(self, data):
        if self.skip or self.closed:
            return
        if self.pre:
            self.px += 17 * data.count("\n")
        else:
            self.chars += len(data.strip())


def estimated_height(text: str) -> int:
    """A page's height in px estimated from its HTML where no browser measures it: 22 px per
    line of text (150 characters a line in the page's column), 17 px per line of code, 22 px
    per table row, each plotly figure's own height, nothing folded in a closed ``<details>``
    but its summary line (:func:`browser_heights` where a browser is installed)."""
    import json

    p = _Height()
    p.feed(text)
    p._line()
    dec, figures = json.JSONDecoder(), 0
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', text):
        _, end = dec.raw_decode(text, m.end())
        layout, _ = dec.raw_decode(text, text.index("{", end))
        figures += layout.get("height", 450)  # plotly's default
    return int(p.px) + figures

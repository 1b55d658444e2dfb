"""The rendered site: every page titled by its notebook, linked to the index and its
neighbours, with contents, key results from the verdicts, set-up code folded and widgets as
placeholders; an index with the root's provenance, one key result per notebook and the claims'
sources; one shared plotly.js, nothing loaded from the network, under 10 MB.

The fast tests render three small notebooks (executed for real) and the rule filing on
in-memory tables; the test marked ``notebooks`` renders the real notebooks from ``data/h200``
(reusing the notebook tests' executions when they ran first in the session)."""

from __future__ import annotations

import functools
import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

nbformat = pytest.importorskip("nbformat")  # report extra

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
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


# --- three small notebooks, executed ---------------------------------------------------------

INTRO = "**Question.** A small page of the site's test.\n\n"
SETUP = "from yolo_sm.report import plots\n\nplots.setup_notebook()"
FIGURE = "import plotly.graph_objects as go\n\ngo.Figure(go.Bar(x=['a', 'b'], y=[1, 2]))"
WIDGET = "import ipywidgets\n\nipywidgets.IntSlider(3)"


def _notebook(title: str, cells: list, intro: str = INTRO):
    v4 = nbformat.v4
    return v4.new_notebook(
        cells=[
            v4.new_markdown_cell(f"# {title}\n\n{intro}"),
            v4.new_code_cell('DATA = "h200"', metadata={"tags": ["parameters"]}),
            v4.new_code_cell(SETUP),
            *cells,
        ]
    )


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """Three notebooks: one named after a rule group (the primer's), one whose topic names
    one (claims, with two sources), one that shows the targets' ids; rendered from h200."""
    from tests.notebook_cache import executed
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report import goals
    from yolo_sm.report.render import notebooks_in, write_site

    v4 = nbformat.v4
    folder = tmp_path_factory.mktemp("nb")
    books = {
        "00_occupancy_primer": _notebook(
            "00 · Probe primer: does the site hold together?",
            [
                v4.new_markdown_cell("## A figure"),
                v4.new_code_cell(FIGURE),
                v4.new_markdown_cell("### A widget"),
                v4.new_code_cell(WIDGET),
                v4.new_markdown_cell("## Findings"),
            ],
        ),
        "01_claims_checked": _notebook(
            "01 · Probe claims: which sources?",
            [v4.new_markdown_cell("## The verdicts"), v4.new_code_cell("1 + 1")],
            intro="Two articles:\n\n1. *An article on width* (width);\n"
            "2. *Another on batching* (batch).\n\n" + INTRO,
        ),
        "02_engines_probe": _notebook(
            "02 · Probe engines: which targets?",
            [
                v4.new_markdown_cell("## Targets"),
                v4.new_code_cell(
                    "import pandas as pd\n"
                    f"pd.DataFrame({{'n': range({len(goals.RULES)})}}, "
                    f"index={[r.id for r in goals.RULES]!r})"
                ),
            ],
        ),
    }
    for stem, nb in books.items():
        nbformat.write(nb, folder / f"{stem}.ipynb")
    site = tmp_path_factory.mktemp("site")
    done = {p: executed(p, "h200") for p in notebooks_in(folder)}
    write_site({p.stem: nb for p, nb in done.items()}, site, open_root("h200"), verdicts_of("h200"))
    return folder, site, done


def test_small_site_pages_index_and_offline(small_site):
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.site import WIDGET_PLACEHOLDER

    folder, site, done = small_site
    texts = check_site(site, done, open_root("h200"))
    primer = texts["00_occupancy_primer.html"]
    # the widget's place says where it lives; the figure draws through Plotly.newPlot
    assert primer.count(WIDGET_PLACEHOLDER) == 1
    assert "Plotly.newPlot" in primer
    # the key-results box sits under the title, before the first section, linking Findings
    box = primer.index('class="yolo-results"')
    assert primer.index("</h1>") < box < primer.index('id="A-figure"')
    assert 'href="#Findings"' in primer[box:]
    # the claims page's sources, by title, on the index
    sources = re.search(r'<ol id="sources">.*?</ol>', texts["index.html"], re.S).group(0)
    assert claims_sources(folder / "01_claims_checked.ipynb") == [
        "An article on width",
        "Another on batching",
    ]
    for title in claims_sources(folder / "01_claims_checked.ipynb"):
        assert f"<cite>{title}</cite>" in sources
    # the targets' rules found their page by the ids it shows
    assert "yolo-results" in texts["02_engines_probe.html"]


def test_the_index_links_each_page_from_its_key_result_and_the_reading_order(small_site):
    folder, site, _ = small_site
    assert "yolo-results" in (site / "01_claims_checked.html").read_text()  # claims live there
    index = (site / "index.html").read_text()
    for p in sorted(folder.glob("*.ipynb")):
        assert index.count(f'href="{p.stem}.html"') >= 3, p.stem  # pages, results, order


# --- which page leads with which rules ---------------------------------------------------------


def _verdicts(rows):
    cols = ["id", "statement", "measured", "unit", "op", "threshold", "partly", "verdict"]
    cols += ["datasets", "scope", "group"]
    return pd.DataFrame(
        [
            {
                "id": i,
                "statement": f"statement {i}",
                "measured": 1.0,
                "unit": "x",
                "op": ">=",
                "threshold": 1.0,
                "partly": float("nan"),
                "verdict": v,
                "datasets": "",
                "scope": "",
                "group": g,
            }
            for i, g, v in rows
        ],
        columns=cols,
    )


def test_groups_find_their_pages_by_name_topic_or_shown_ids():
    from yolo_sm.report.site import Page
    from yolo_sm.report.site_results import home_pages

    v = _verdicts(
        [
            ("a1", "03_alpha", "holds"),
            ("c1", "claims", "holds"),
            ("g1", "goals", "does not hold"),
            ("g2", "goals", "holds"),
            ("x1", "07_gone", "holds"),
        ]
    )
    pages = [
        Page("03_alpha", "03 · A"),
        Page("04_claims_checked", "04 · C"),
        Page("05_b", "05 · B"),
    ]
    shown = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("", outputs=[])],
    )
    shown.cells[0].outputs = [
        nbformat.v4.new_output(
            "execute_result", data={"text/html": "<th>g1</th><th>g2</th>"}, execution_count=1
        )
    ]
    homes = home_pages(v, pages, {"05_b": shown, "03_alpha": nbformat.v4.new_notebook()})
    assert homes == {"03_alpha": "03_alpha", "claims": "04_claims_checked", "goals": "05_b"}
    assert home_pages(v, pages) == {"03_alpha": "03_alpha", "claims": "04_claims_checked"}


def test_a_page_leads_with_its_headlines_in_order_or_its_first_rules(monkeypatch):
    from yolo_sm.report import site_results
    from yolo_sm.report.site import Page

    v = _verdicts([(f"r{i}", "01_x", "holds") for i in range(6)] + [("o1", "other", "partly")])
    page = Page("01_x", "01 · X: why?")
    homes = {"01_x": "01_x", "other": "01_x"}
    monkeypatch.setattr(site_results, "HEADLINES", {"01_x": ("r4", "r1", "no_such_rule")})
    rows = site_results.page_rows(v, page, homes)
    assert list(rows.id) == ["r4", "r1", "o1"]  # its own group first, then the group without
    assert site_results.page_tally(v, page, homes) == {"holds": 6, "partly": 1}
    monkeypatch.setattr(site_results, "HEADLINES", {})
    assert list(site_results.page_rows(v, page, homes).id) == ["r0", "r1", "r2", "o1"]
    # the verdict shown is the table's: flip it and the box follows
    box = site_results.results_box(v, page, homes, "GPU X")
    assert box.count("verdict-holds") == 3 and "verdict-partly" in box
    flipped = v.assign(verdict=v.verdict.where(v.id != "r0", "does not hold"))
    assert "verdict-does-not-hold" in site_results.results_box(flipped, page, homes, "GPU X")


def test_headlines_name_rules_of_their_group():
    from yolo_sm.report import catalog
    from yolo_sm.report.site_results import HEADLINES

    groups = {r.id: r.group for r in catalog.all_rules()}
    for group, ids in HEADLINES.items():
        assert ids, group
        assert {groups.get(i) for i in ids} == {group}, group


def test_every_rule_group_has_a_page_among_the_notebooks():
    """Each group of the catalog files under a notebook of the folder, by its name or its
    topic, except the targets, which find theirs by the ids the page shows."""
    from yolo_sm.report import catalog
    from yolo_sm.report.site import Page
    from yolo_sm.report.site_results import home_pages

    nbs = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    pages = [Page(p.stem, notebook_title(p)) for p in nbs]
    groups = {r.group for r in catalog.all_rules()}
    verdicts = _verdicts([(r.id, r.group, "holds") for r in catalog.all_rules()])
    homes = home_pages(verdicts, pages)
    assert groups - set(homes) <= {"goals"}, groups - set(homes)
    sources = {p.stem for p in nbs if claims_sources(p)}
    assert homes["claims"] in sources  # the claims page names its sources


def test_provenance_rows_come_from_the_root():
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.site_index import cudnn_text, provenance_rows

    for name in ("h200", "cpu"):
        root = open_root(name)
        rows = dict(provenance_rows(root))
        m = root.machine()
        assert rows["GPU"] == m.get("gpu_name", "—")
        assert rows["PyTorch"] == m["torch"] and rows["CUDA"] == m["cuda"]
        assert rows["datasets in the root"] == str(len(root.names()))
    assert cudnn_text("91900") == "9.19.0 (91900)" and cudnn_text("8906") == "8.9.6 (8906)"


def test_offline_removes_remote_scripts_and_style_sheets_only():
    from yolo_sm.report.site import offline

    page = (
        '<script src="https://cdn.example/x.js"></script><script src="plotly.min.js"></script>'
        '<link rel="stylesheet" href="//cdn.example/a.css"><link rel="stylesheet" href="s.css">'
        '<a href="https://example.org/paper">a paper</a>'
    )
    out = offline(page)
    assert "cdn.example" not in out
    assert 'src="plotly.min.js"' in out and 'href="s.css"' in out
    assert 'href="https://example.org/paper"' in out  # a reference link stays


# --- the real notebooks ------------------------------------------------------------------------


@pytest.mark.notebooks
def test_site_from_the_h200_root(tmp_path):
    from tests.notebook_cache import executed
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.render import notebooks_in, write_site

    root = open_root("h200")
    notebooks = notebooks_in(NOTEBOOKS)
    done = {p: executed(p, "h200") for p in notebooks}
    write_site({p.stem: nb for p, nb in done.items()}, tmp_path / "site", root, verdicts_of("h200"))
    texts = check_site(tmp_path / "site", done, root)
    claims = [p for p in notebooks if claims_sources(p)]
    assert claims, "no notebook names the claims' sources"
    for title in claims_sources(claims[0]):
        assert f"<cite>{title}</cite>" in texts["index.html"]
    # every page that decides rules leads with a key-results box
    assert (
        sum("yolo-results" in t for f, t in texts.items() if f != "index.html")
        >= len(notebooks) - 1
    )


def test_a_rendering_without_a_root_reads_the_verdicts_of_the_notebooks_own_data(tmp_path):
    from yolo_sm.contract.errors import UserError
    from yolo_sm.report.render import default_data

    v4 = nbformat.v4
    nb = v4.new_notebook(
        cells=[v4.new_code_cell('DATA = "cpu"  # a root', metadata={"tags": ["parameters"]})]
    )
    nbformat.write(nb, tmp_path / "00_a.ipynb")
    assert default_data(tmp_path / "00_a.ipynb") == "cpu"
    nb.cells[0].metadata["tags"] = []
    nbformat.write(nb, tmp_path / "00_a.ipynb")
    with pytest.raises(UserError, match="DATA"):
        default_data(tmp_path / "00_a.ipynb")


def test_the_index_of_a_root_without_a_gpu_names_its_machine_and_no_gpu():
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.site_index import index_html

    root = open_root("cpu")
    text = index_html(root, [], _verdicts([]), {}, {})
    prov = re.search(r'<table[^>]*id="provenance".*?</table>', text, re.S).group(0)
    assert "<th>GPU</th><td>—</td>" in prov
    assert html.escape(root.machine()["cpu_model"]) in prov and "H200" not in text
    assert html.escape(root.device_name()) in read_page_text(text).title


def read_page_text(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p

"""The rendered site: every page titled by its notebook, linked to the index and its
neighbours, with contents, key results from the verdicts, set-up code folded and widgets as
placeholders; an index with the root's provenance, one key result per notebook and the claims'
sources; one shared plotly.js, nothing loaded from the network, under 10 MB.

The fast tests render three small notebooks (executed for real) and the rule filing on
in-memory tables; the test marked ``notebooks`` renders the real notebooks from ``data/h200``
(reusing the notebook tests' executions when they ran first in the session)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd
import pytest

nbformat = pytest.importorskip("nbformat")  # report extra

from tests.site_checks import (  # noqa: E402  (after the report extra's check)
    check_site,
    claims_sources,
    notebook_title,
    read_page_text,
    verdicts_of,
)

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


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
    """Three notebooks: two named after a rule group (the primer's, the fast engines'), one
    whose topic names one (claims, with two sources); rendered from h200."""
    from tests.notebook_cache import executed
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.render import notebooks_in, write_site
    from yolo_sm.report.rules import topic_rules

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
        "10_fast_engines": _notebook(
            "10 · Probe engines: which findings?",
            [
                v4.new_markdown_cell("## Findings"),
                v4.new_code_cell(
                    "import pandas as pd\n"
                    f"pd.DataFrame({{'n': range({len(topic_rules('deploy'))})}}, "
                    f"index={[r.id for r in topic_rules('deploy')]!r})"
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
    # the fast-engine findings found their page by its name
    assert "yolo-results" in texts["10_fast_engines.html"]


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


def test_groups_find_their_pages_by_name_or_topic():
    from yolo_sm.report.site import Page
    from yolo_sm.report.site_results import home_pages

    v = _verdicts(
        [("a1", "03_alpha", "holds"), ("c1", "claims", "holds"), ("x1", "07_gone", "holds")]
    )
    pages = [
        Page("03_alpha", "03 · A"),
        Page("04_claims_checked", "04 · C"),
        Page("05_b", "05 · B"),
    ]
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


def test_a_page_says_in_one_line_what_the_full_plan_adds_for_its_untested_headlines(tmp_path):
    import json

    from yolo_sm.report import site_results
    from yolo_sm.report.site import Page

    # a root holding ncu_width_b8 only (a root's datasets are named in its verdicts' "datasets")
    (tmp_path / "manifest.json").write_text(
        json.dumps({"datasets": {"ncu_width_b8": {"file": "ncu_width_b8.parquet"}}})
    )
    v = _verdicts([(i, "01_x", "not tested") for i in "ab"] + [("c", "01_x", "holds")])
    v["datasets"] = ["r/ncu_batch_w1, r/ncu_width_b8", "r/ncu_width_b8", "r/sweep_presets"]
    v.attrs.update(root_name="r", root_path=str(tmp_path))
    page, homes = Page("01_x", "01 · X: why?"), {"01_x": "01_x"}
    line = site_results.lacking_line(v, v)
    # one rule lacks data (ncu_batch_w1); b is not tested on data the root holds; c is decided
    assert line.startswith("1 of these reads") and "\n" not in line
    assert "full plan adds ncu_batch_w1 (" in line and "--plan data/plans/full.yaml" in line
    assert "sweep_presets" not in line and "ncu_width_b8" not in line
    assert html.escape(line) in site_results.results_box(v, page, homes, "GPU X")
    # decide rule a and the line goes; a table without its root says nothing
    decided = v.assign(verdict="holds")
    decided.attrs = dict(v.attrs)
    assert site_results.lacking_line(decided, decided) == ""
    bare = v.copy()
    bare.attrs = {}
    assert site_results.lacking_line(bare, bare) == ""


def test_headlines_name_rules_of_their_group():
    from yolo_sm.report import catalog
    from yolo_sm.report.site_results import HEADLINES

    pairs = (r for rules, _ in catalog.PAIR_SOURCES for r in rules)  # notebook 12's
    groups = {r.id: r.group for r in (*catalog.all_rules(), *pairs)}
    for group, ids in HEADLINES.items():
        assert ids, group
        assert {groups.get(i) for i in ids} == {group}, group


def test_every_rule_group_has_a_page_among_the_notebooks():
    """Each group of the catalog files under a notebook of the folder, by its name or its
    topic."""
    from yolo_sm.report import catalog
    from yolo_sm.report.site import Page
    from yolo_sm.report.site_results import home_pages

    nbs = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    pages = [Page(p.stem, notebook_title(p)) for p in nbs]
    groups = {r.group for r in catalog.all_rules()}
    verdicts = _verdicts([(r.id, r.group, "holds") for r in catalog.all_rules()])
    homes = home_pages(verdicts, pages)
    assert groups <= set(homes), groups - set(homes)
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


@pytest.fixture(scope="module")
def h200_site(tmp_path_factory):
    """The site rendered from every notebook executed on the H200 root (the notebook tests'
    executions): ``(site folder, {notebook path: executed notebook})``."""
    from tests.notebook_cache import executed
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.render import notebooks_in, write_site

    done = {p: executed(p, "h200") for p in notebooks_in(NOTEBOOKS)}
    site = tmp_path_factory.mktemp("h200_site") / "site"
    write_site({p.stem: nb for p, nb in done.items()}, site, open_root("h200"), verdicts_of("h200"))
    return site, done


@pytest.mark.notebooks
def test_site_from_the_h200_root(h200_site):
    """The site of every notebook on the H200 root holds together, and is short enough to read
    with each answer at the top (one test: both read the same rendering)."""
    from yolo_sm.contract.datasets import open_root

    root = open_root("h200")
    site, done = h200_site
    notebooks = list(done)
    texts = check_site(site, done, root)
    claims = [p for p in notebooks if claims_sources(p)]
    assert claims, "no notebook names the claims' sources"
    for title in claims_sources(claims[0]):
        assert f"<cite>{title}</cite>" in texts["index.html"]
    # every page that is a rule group's home (by name, or by topic: claims) leads with a
    # key-results box; pages whose rules decide on other roots (your model, two machines) need none
    groups = set(verdicts_of("h200").group)
    homes = {
        p.stem
        for p in notebooks
        if p.stem in groups or any(p.stem.split("_", 1)[1].startswith(g) for g in groups)
    }
    assert len(homes) >= len(groups)
    for stem in homes:
        assert "yolo-results" in texts[f"{stem}.html"], stem
    _short_enough_with_each_answer_at_the_top(site, done)


def _short_enough_with_each_answer_at_the_top(site, done):
    """At 1,400 px wide: each page at most 12,000 px tall, the site at most 100,000 px, each
    key-results box within the first 1,000 px. Measured in headless Chromium where one is
    installed; else estimated from the HTML (site_checks.estimated_height; against Chromium
    on the 19 pages of two H200 sites, 188,360 and 129,373 px in all: 228,160 and 119,770 px,
    each page 0.83 to 1.43 times its measured height, correlation 0.99)."""
    from tests.site_checks import (
        PAGE_MAX_PX,
        SITE_MAX_PX,
        browser,
        browser_heights,
        estimated_height,
    )

    files = ["index.html", *(f"{p.stem}.html" for p in done)]
    if browser():
        measured = browser_heights(site, files)
        heights = {f: h for f, (h, _) in measured.items()}
        tops = {f: top for f, (_, top) in measured.items() if top >= 0}
    else:
        heights = {f: estimated_height((site / f).read_text()) for f in files}
        tops = {}
    print("page heights (px):", heights, "in all", sum(heights.values()))
    assert all(top <= 1_000 for top in tops.values()), tops
    assert {f: h for f, h in heights.items() if h > PAGE_MAX_PX} == {}
    assert sum(heights.values()) <= SITE_MAX_PX


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


# --- writing the site: no planted link followed, no half-written site --------------------------


def _tiny(stem="00_tiny"):
    """One unexecuted notebook (write_site needs no kernel)."""
    v4 = nbformat.v4
    return {stem: _notebook("00 · Tiny: is it written safely?", [v4.new_markdown_cell("## A")])}


def test_the_site_never_writes_through_a_planted_link(tmp_path):
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.render import write_site

    site, victim = tmp_path / "site", tmp_path / "victim.txt"
    site.mkdir()
    victim.write_text("precious")
    # the pages, an asset and the old renderer's predictable temporary names, all links
    for name in ("index.html", "00_tiny.html", "plotly.min.js", "site.css", "index.html.partial"):
        (site / name).symlink_to(victim)
    write_site(_tiny(), site, open_root("h200"), _verdicts([]))
    assert victim.read_text() == "precious"
    for name in ("index.html", "00_tiny.html", "plotly.min.js", "site.css"):
        assert not (site / name).is_symlink() and (site / name).stat().st_size > 0, name
    assert not [p.name for p in site.iterdir() if p.name.startswith(".")]  # no temporary left
    assert oct((site / "index.html").stat().st_mode & 0o044) == oct(0o044)  # readable as before


def test_an_interrupted_site_leaves_the_old_one_as_it_was(tmp_path, monkeypatch):
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report import render

    site = tmp_path / "site"
    render.write_site(_tiny(), site, open_root("h200"), _verdicts([]))
    before = {p.name: p.read_bytes() for p in site.iterdir()}

    def stopped(*a, **k):
        raise KeyboardInterrupt  # a SIGINT while the index is made, after the pages

    monkeypatch.setattr(render, "index_html", stopped)
    with pytest.raises(KeyboardInterrupt):
        render.write_site(_tiny(), site, open_root("cpu"), _verdicts([]))
    assert {p.name: p.read_bytes() for p in site.iterdir()} == before


SLOW = "import pathlib, time\npathlib.Path('STARTED').touch()\ntime.sleep(120)"


@pytest.mark.parametrize(("signum", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_render_exits_130_or_143_and_keeps_the_old_site(tmp_path, signum, code):
    import os
    import signal
    import subprocess
    import sys
    import time

    folder = tmp_path / "nb"
    folder.mkdir()
    nb = _notebook("00 · Slow: does a signal stop it?", [nbformat.v4.new_code_cell(SLOW)])
    nbformat.write(nb, folder / "00_slow.ipynb")
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("the old site")
    cmd = ["-m", "yolo_sm", "render"]
    args = ["--notebooks", str(folder), "--data", "h200", "--out", str(site)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, *cmd, *args], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not (folder / "STARTED").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (folder / "STARTED").exists(), "the notebook never started"
    proc.send_signal(getattr(signal, signum))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    assert [p.name for p in site.iterdir()] == ["index.html"]
    assert (site / "index.html").read_text() == "the old site"


def test_long_tables_and_verdicts_shown_above_fold_under_one_line():
    from yolo_sm.report.site import FOLD, LONG_TABLE_ROWS, fold_outputs

    v4 = nbformat.v4

    def shows(text):
        return v4.new_output("display_data", data={"text/html": text})

    rows = "".join(f"<tr><td>{i}</td></tr>" for i in range(LONG_TABLE_ROWS + 1))
    cell = v4.new_code_cell("")
    cell.outputs = [
        shows("<ul><li>A &amp; B holds</li><li>C holds</li></ul>"),  # C is new here
        shows(f"<table><thead><tr><th>n</th></tr></thead>{rows}</table>"),
        shows("<table><tr><td>C holds</td></tr><tr><td>A & B holds</td></tr></table>"),
        shows(f"<table>{rows[: rows.index('<tr><td>2')]}</table>"),  # short: stays open
        shows("<p>D holds, E holds, F holds</p>"),  # three new verdicts at once
        shows("<p>E holds, F holds</p>"),  # stated in the folded output above: folded again
    ]
    nb = v4.new_notebook(cells=[cell])
    fold_outputs(nb, {"A & B"}, ("A & B", "C", "D", "E", "F"))
    folds = [o.get("metadata", {}).get(FOLD) for o in nb.cells[0].outputs]
    assert folds[0] is None and folds[3] is None
    assert f"{LONG_TABLE_ROWS + 1} rows" in folds[1] and "2 verdicts shown above" in folds[2]
    assert "3 verdicts of this page" in folds[4] and "2 verdicts shown above" in folds[5]
    # the page folds them in <details>
    from yolo_sm.report.site import Page, page_html

    text = page_html(
        v4.new_notebook(cells=[v4.new_markdown_cell("# 00 · T"), cell]), Page("00_t", "00 · T")
    )
    assert text.count('<details class="yolo-fold">') == 4

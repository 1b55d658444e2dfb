"""Every notebook executes on CPU from the shipped data, and none is committed with outputs."""

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")  # notebook extra; absent on the bare H200 image

NOTEBOOKS = sorted(
    (Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")
)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no NN_topic.ipynb notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped_and_has_parameters(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), (
        "strip outputs: make strip"
    )
    assert any("parameters" in c.metadata.get("tags", []) for c in code), "needs a parameters cell"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


def _executes_and_renders(path):
    from yolo_sm.report.render import execute, to_html

    nb = execute(path, timeout=600)
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    html = to_html(nb)
    assert "Plotly.newPlot" in html, "figures must render in the HTML"
    # self-contained: plotly.js is inlined, no script is loaded from the network
    assert not re.search(r"<script[^>]+src=[\"']https?://", html)
    return html


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, tmp_path):
    from yolo_sm.report.render import missing_datasets

    missing = missing_datasets(path)
    if missing:  # e.g. 08 until h200/bench_fast_engines is in data/h200/manifest.json
        pytest.skip(f"{path.name} waits for dataset(s) {', '.join(missing)} (not shipped yet)")
    _executes_and_renders(path)


@pytest.mark.notebooks
def test_fast_engines_notebook_on_the_synthetic_bench(tmp_path, monkeypatch):
    """08 executes and renders from the synthetic bench fixture shipped in a data folder of its
    own (the kernel inherits YOLO_SM_DATA), and its findings say the data is synthetic."""
    from tests.fixtures.synthetic_bench import ship

    ship(tmp_path)
    # the notebook's other datasets (Kineto kernels of the eager fp16, fp8 and compiled
    # engines) are the real ones
    import shutil

    from yolo_sm.contract import datasets, manifest

    for name in ("trace_fp8_w1_b64", "trace_compile_w1_b64"):
        real = datasets.info(f"h200/{name}")
        shutil.copy(datasets.path(f"h200/{name}"), tmp_path / "h200" / real["file"])
        manifest.register(
            tmp_path / "h200",
            name,
            real["file"],
            real["kind"],
            real["description"],
            real["command"],
        )
    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path))
    html = _executes_and_renders(NOTEBOOKS[0].parent / "08_fast_engines.ipynb")
    assert "synthetic test fixture" in html and "Goal 2 missed" in html


def test_render_lists_notebooks_waiting_for_data(tmp_path, monkeypatch):
    """A notebook whose datasets are not shipped is not executed; the index says what it needs."""
    from yolo_sm.report.render import missing_datasets, render_site

    monkeypatch.setenv("YOLO_SM_DATA", str(tmp_path / "data"))
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# 99 · x"), nbformat.v4.new_code_cell("1 / 0")]
    )
    nb.metadata["yolo_sm"] = {"requires": ["h200/nope"]}
    (tmp_path / "nb").mkdir()
    nbformat.write(nb, tmp_path / "nb" / "99_waits.ipynb")
    assert missing_datasets(tmp_path / "nb" / "99_waits.ipynb") == ["h200/nope"]
    index = render_site(tmp_path / "nb", tmp_path / "site")
    assert "99_waits — not rendered: waits for dataset(s) h200/nope" in index.read_text()
    assert not (tmp_path / "site" / "99_waits.html").exists()

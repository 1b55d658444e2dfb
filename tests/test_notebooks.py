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


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, tmp_path):
    from yolo_sm.render import execute, to_html

    nb = execute(path, timeout=600)
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    html = to_html(nb)
    assert "Plotly.newPlot" in html, "figures must render in the HTML"
    # self-contained: plotly.js is inlined, no script is loaded from the network
    assert not re.search(r"<script[^>]+src=[\"']https?://", html)

"""Execute the notebooks and render them into a static, self-contained site.

nbclient runs each notebook (from its own folder, so relative paths work); nbconvert's HTML
exporter renders it. Plotly figures carry plotly.js inline (see ``yolo_sm.report.plots``), and
the page
template's CDN scripts (require.js, MathJax) are left out, so the site opens from disk offline.

A notebook whose metadata lists ``yolo_sm.requires`` (dataset names such as
``h200/bench_fast_engines``) is rendered only once those datasets are in a shipped manifest
(``yolo_sm.contract.datasets``); until then the site lists it as waiting, and the notebook
tests skip it.
"""

from __future__ import annotations

import html
import os
import re
import time
from pathlib import Path

from yolo_sm.contract.datasets import list_datasets
from yolo_sm.contract.errors import UserError

_CDN_SCRIPT = re.compile(r'<script[^>]+src="(?:https?://[^"]*)?"[^>]*>\s*</script>', re.I)


def execute(path: Path, timeout: int = 900):
    """Execute one notebook in place (in memory); returns the executed nbformat node."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env_kernel = os.environ.get("YOLO_SM_KERNEL", "python3")
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=env_kernel,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return nb


def to_html(nb) -> str:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    exporter.mathjax_url = ""
    body, _ = exporter.from_notebook_node(nb)
    return _CDN_SCRIPT.sub("", body)


def notebooks_in(folder: str | os.PathLike, only: list[str] | None = None) -> list[Path]:
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"notebook folder {folder} does not exist")
    paths = sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))
    if only:
        paths = [p for p in paths if any(p.name.startswith(o) for o in only)]
    if not paths:
        raise UserError(f"no NN_topic.ipynb notebooks in {folder}")
    return paths


def required_datasets(path: Path) -> list[str]:
    """The datasets a notebook declares in its metadata (``{"yolo_sm": {"requires": [...]}}``)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return list(nb.metadata.get("yolo_sm", {}).get("requires", []))


def missing_datasets(path: Path) -> list[str]:
    """The datasets a notebook needs that no manifest under
    ``yolo_sm.contract.datasets.data_dir()`` holds."""

    need = required_datasets(Path(path))
    if not need:
        return []
    shipped = set(list_datasets().get("name", []))
    return [n for n in need if n not in shipped]


def render_site(
    notebooks: str | os.PathLike,
    out: str | os.PathLike,
    timeout: int = 900,
    only: list[str] | None = None,
) -> Path:
    """Execute and render every ``NN_topic.ipynb`` whose datasets are shipped; write
    ``out/index.html`` linking them and naming the notebooks that wait for data."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries, waiting = [], []
    for path in notebooks_in(notebooks, only):
        missing = missing_datasets(path)
        if missing:
            waiting.append((path.stem, missing))
            print(f"skipped {path.name}: waits for dataset(s) {', '.join(missing)}", flush=True)
            continue
        t0 = time.perf_counter()
        nb = execute(path, timeout)
        page = out / f"{path.stem}.html"
        tmp = page.with_suffix(".html.partial")
        tmp.write_text(to_html(nb), encoding="utf-8")
        os.replace(tmp, page)
        entries.append((path.stem, _title(nb), time.perf_counter() - t0))
        print(f"rendered {path.name} in {entries[-1][2]:.1f} s", flush=True)
    index = out / "index.html"
    items = "\n".join(
        f'<li><a href="{html.escape(s)}.html">{html.escape(s)}</a> — {html.escape(t)}</li>'
        for s, t, _ in entries
    )
    items += "".join(
        f"\n<li>{html.escape(s)} — not rendered: waits for dataset(s) "
        f"{html.escape(', '.join(m))}</li>"
        for s, m in waiting
    )
    index.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>yolo_sm notebooks</title>"
        "<style>body{font-family:sans-serif;max-width:50em;margin:2em auto}"
        "li{margin:.4em 0}</style>"
        f"</head><body><h1>yolo_sm notebooks</h1><ul>\n{items}\n</ul></body></html>\n",
        encoding="utf-8",
    )
    return index


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("# ").strip()
    return ""


def strip_outputs(folder: str | os.PathLike) -> list[Path]:
    """Remove outputs and execution counts from every notebook in ``folder``; returns the
    notebooks that changed."""
    import nbformat

    changed = []
    for path in sorted(Path(folder).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        dirty = False
        for cell in nb.cells:
            if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None):
                cell.outputs, cell.execution_count, dirty = [], None, True
        if dirty:
            nbformat.write(nb, path)
            changed.append(path)
    return changed


if __name__ == "__main__":  # python -m yolo_sm.report.render --strip notebooks
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--strip":
        for p in strip_outputs(sys.argv[2]):
            print(f"stripped {p}")
    else:
        sys.exit("usage: python -m yolo_sm.report.render --strip FOLDER")

"""Execute the notebooks from one dataset root and render them into a static, self-contained
site.

nbclient runs each notebook (from its own folder, so relative paths work); nbconvert's HTML
exporter renders it. Plotly figures carry plotly.js inline (see ``yolo_sm.report.plots``), and
the page template's CDN scripts (require.js, MathJax) are left out, so the site opens from disk
offline.

The root is a notebook parameter, papermill style: after the cell tagged ``parameters``, render
inserts a cell tagged ``injected-parameters`` that sets ``DATA`` to the root and whatever the
root's ``notebook_parameters.yaml`` sets for that notebook, e.g. on a CPU root::

    01_width_scaling:          # a notebook's file name without .ipynb, or its number ("01")
      SWEEP: sweep_cpu         # which sweep plays the part of the main sweep there

A notebook whose dataset the root lacks still renders: its section prints one line saying so
(``DataRoot.missing``).
"""

from __future__ import annotations

import html
import os
import re
import sys
import time
from pathlib import Path

from yolo_sm.contract.datasets import DataRoot, data_dir, open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import load_yaml

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding yolo_sm/
_CDN_SCRIPT = re.compile(r'<script[^>]+src="(?:https?://[^"]*)?"[^>]*>\s*</script>', re.I)


def execute(path: Path, timeout: int = 900, data: str | os.PathLike | DataRoot | None = None):
    """Execute one notebook in memory (from the root ``data`` when given, see :func:`prepare`);
    returns the executed nbformat node."""
    from nbclient import NotebookClient

    path = Path(path)
    nb = prepare(path, data)
    env_kernel = os.environ.get("YOLO_SM_KERNEL", "python3")
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=env_kernel,
        resources={"metadata": {"path": str(path.parent)}},
    )
    # the kernel imports the yolo_sm that renders (a checkout's, not another install's)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(PACKAGE_ROOT), saved)))
    try:
        client.execute()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return nb


def to_html(nb) -> str:
    """The executed notebook as one HTML page, titled by its first heading (the browser tab
    and bookmarks show which notebook it is)."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    exporter.mathjax_url = ""
    title = _title(nb) or "yolo_sm notebook"
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
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


PARAMETERS_FILE = "notebook_parameters.yaml"


def root_parameters(root: DataRoot, notebook: str) -> dict:
    """The parameters the root's ``notebook_parameters.yaml`` sets for ``notebook`` (a file name
    without ``.ipynb``): the entries under its full name and under its number (``"01"``), the
    full name winning."""
    f = root.path / PARAMETERS_FILE
    if not f.exists():
        return {}
    table = load_yaml(str(f))
    number = notebook.split("_", 1)[0]
    out = {}
    for key in (number, notebook):
        entry = table.get(key) or {}
        if not isinstance(entry, dict):
            raise UserError(f"{f}: {key} must map parameter names to values")
        out.update(entry)
    return out


def as_root(data: str | os.PathLike | DataRoot) -> DataRoot:
    return data if isinstance(data, DataRoot) else open_root(data)


def _data_value(root: DataRoot) -> str:
    """What ``DATA`` is set to: the root's name when it is the folder of that name under
    :func:`data_dir` (the page then shows ``DATA = 'cpu'``), else its absolute path."""
    if (data_dir() / root.name).resolve() == Path(root.path).resolve():
        return root.name
    return str(root.path)


def inject_parameters(nb, params: dict):
    """Insert a code cell tagged ``injected-parameters`` setting ``params`` after the cell
    tagged ``parameters`` (first, when there is none), as papermill does; returns ``nb``."""
    import nbformat

    lines = [f"{k} = {v!r}" for k, v in params.items()]
    cell = nbformat.v4.new_code_cell(
        "# Parameters of this rendering\n" + "\n".join(lines),
        metadata={"tags": ["injected-parameters"]},
    )
    where = next(
        (i + 1 for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])), 0
    )
    nb.cells.insert(where, cell)
    return nb


def prepare(path: Path, data: str | os.PathLike | DataRoot | None = None):
    """Notebook ``path`` read, with ``DATA`` and the root's parameters injected when ``data``
    names a root (None: the notebook's own parameters)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    if data is not None:
        root = as_root(data)
        params = {"DATA": _data_value(root), **root_parameters(root, path.stem)}
        inject_parameters(nb, params)
    return nb


def render_site(
    notebooks: str | os.PathLike,
    out: str | os.PathLike,
    timeout: int = 900,
    only: list[str] | None = None,
    data: str | os.PathLike | DataRoot | None = None,
) -> Path:
    """Execute and render every ``NN_topic.ipynb`` of ``notebooks`` from the dataset root
    ``data`` (a name under ``data/`` or a path; None: each notebook's own ``DATA``) into
    ``out``; write ``out/index.html`` linking them, titled with the machine the root was
    measured on (from provenance). Returns the index."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    root = as_root(data) if data is not None else None  # checked before any notebook runs
    entries = []
    for path in notebooks_in(notebooks, only):
        t0 = time.perf_counter()
        nb = execute(path, timeout, data)
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
    title = (
        f"yolo_sm notebooks: {root.device_name()} ({root.name})" if root else "yolo_sm notebooks"
    )
    index.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;max-width:50em;margin:2em auto}"
        "li{margin:.4em 0}</style>"
        f"</head><body><h1>{html.escape(title)}</h1><ul>\n{items}\n</ul></body></html>\n",
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


def main(argv=None) -> int:
    """``python -m yolo_sm.report.render [--data ROOT] [--notebooks DIR] [--out DIR]
    [--only 01,02]``, or ``--strip FOLDER``: what ``make report`` and ``make strip`` run, in a
    venv without torch."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m yolo_sm.report.render")
    ap.add_argument("--strip", metavar="FOLDER", help="remove outputs from the notebooks")
    ap.add_argument("--data", default=None, help="dataset root: h200, cpu or a folder")
    ap.add_argument("--notebooks", default="notebooks")
    ap.add_argument("--out", default="site")
    ap.add_argument("--only", default="", help="comma list of notebook name prefixes")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = ap.parse_args(argv)
    if args.strip:
        for p in strip_outputs(args.strip):
            print(f"stripped {p}")
        return 0
    only = [x for x in args.only.split(",") if x]
    try:
        index = render_site(args.notebooks, args.out, args.timeout, only, data=args.data)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"rendered {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Execute the notebooks from one dataset root and render them into a static, self-contained
site.

nbclient runs each notebook (from its own folder, so relative paths work); the pages, their
navigation and key results are :mod:`yolo_sm.report.site`, :mod:`~yolo_sm.report.site_results`
and :mod:`~yolo_sm.report.site_index`. The pages share one copy of plotly.js and load nothing
from the network, so the site opens from disk offline (a folder or a zip).

The root is a notebook parameter, papermill style: after the cell tagged ``parameters``, render
inserts a cell tagged ``injected-parameters`` that sets ``DATA`` to the root and whatever the
root's ``notebook_parameters.yaml`` sets for that notebook, e.g. on a CPU root::

    01_width_scaling:          # a notebook's file name without .ipynb, or its number ("01")
      SWEEP: sweep_cpu         # which sweep plays the part of the main sweep there

A notebook whose dataset the root lacks still renders: its section prints one line saying so
(``DataRoot.missing``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pandas as pd

from yolo_sm.contract.datasets import DataRoot, data_dir, open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import load_yaml
from yolo_sm.report import catalog
from yolo_sm.report.site import INDEX, Page, page_html, title_of, write_assets
from yolo_sm.report.site_index import index_html
from yolo_sm.report.site_results import home_pages, results_box

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding yolo_sm/


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
    """The executed notebook as one page of the site (:func:`yolo_sm.report.site.page_html`),
    titled by its first heading, its neighbours the index."""
    return page_html(nb, Page("", title_of(nb)))


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
    """Execute every ``NN_topic.ipynb`` of ``notebooks`` (those ``only`` names, when given)
    from the dataset root ``data`` (a name under ``data/`` or a path; None: each notebook's own
    ``DATA``) and write the site into ``out`` (:func:`write_site`). Returns the index."""
    root = as_root(data) if data is not None else None  # checked before any notebook runs
    paths = notebooks_in(notebooks, only)
    if root is None:
        root = as_root(default_data(paths[0]))
    executed = {}
    for path in paths:
        t0 = time.perf_counter()
        executed[path.stem] = execute(path, timeout, data)
        print(f"executed {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return write_site(executed, out, root)


def write_site(
    executed: dict, out: str | os.PathLike, root: DataRoot, verdicts: pd.DataFrame | None = None
) -> Path:
    """Write the site of the executed notebooks ``executed`` (file stem -> notebook, in
    reading order) into ``out``: one page per notebook, each linking the previous, the next
    and the index, with the key results of the rules ``root``'s verdict table files under it
    (:mod:`yolo_sm.report.site_results`); ``index.html``
    (:mod:`yolo_sm.report.site_index`); and the files every page shares (plotly.js, the
    style sheets). ``verdicts``: ``root``'s verdict table when the caller has it already.
    Returns the index."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pages = [Page(stem, title_of(nb)) for stem, nb in executed.items()]
    verdicts = catalog.verdict_table(root) if verdicts is None else verdicts
    homes = home_pages(verdicts, pages, executed)
    machine = root.device_name()
    write_assets(out)
    for i, page in enumerate(pages):
        prev = pages[i - 1] if i else None
        nxt = pages[i + 1] if i + 1 < len(pages) else None

        def box(heads, page=page):
            findings = next((h for _, h, t in heads if t.lower() == "findings"), None)
            return results_box(verdicts, page, homes, machine, findings)

        _write(out / page.file, page_html(executed[page.stem], page, prev, nxt, box))
    first_cells = {
        s: next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
        for s, nb in executed.items()
    }
    index = out / INDEX
    _write(index, index_html(root, pages, verdicts, homes, first_cells))
    return index


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def default_data(path: Path) -> str:
    """The ``DATA`` a notebook's ``parameters`` cell sets to a literal (the root a rendering
    without ``--data`` reads its verdicts from)."""
    import ast

    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                if (
                    isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "DATA" for t in node.targets)
                    and isinstance(node.value, ast.Constant)
                ):
                    return node.value.value
    raise UserError(f"{path} sets no DATA in a cell tagged parameters; pass --data")


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

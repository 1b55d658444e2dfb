"""Execute the notebooks from one dataset root and render them into a static, offline site.

A cell tagged ``injected-parameters`` sets ``DATA`` and what the root's
``notebook_parameters.yaml`` sets for the notebook (by stem or number): names its ``parameters``
cell assigns, literals of their defaults' types. Pages are renamed into place only once all are
written: SIGINT / SIGTERM leave the old site."""

from __future__ import annotations

import ast
import math
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

from yolo_sm.contract.datasets import DataRoot, data_dir, open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.plans import load_yaml
from yolo_sm.report import catalog
from yolo_sm.report.site import INDEX, Page, page_html, site_assets, title_of
from yolo_sm.report.site_index import index_html
from yolo_sm.report.site_results import home_pages, page_rows, results_box

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding yolo_sm/


def execute(path: Path, timeout: int = 900, data=None, limit: float | None = None):
    """Execute notebook ``path`` in memory from root ``data`` (:func:`prepare`, :func:`run`)."""
    return run(prepare(Path(path), data), Path(path).parent, timeout, limit)


def run(nb, folder: Path, timeout: int = 900, limit: float | None = None):
    """Execute ``nb`` in a kernel started in ``folder``: ``timeout`` s a cell, ``limit`` s in
    all (longer: UserError); a signal stops the kernel and is raised here. Returns ``nb``."""
    from nbclient import NotebookClient
    from nbclient.output_widget import OutputWidget

    class OutputArea(OutputWidget):
        """An Output widget sending no comm message back (one could swallow a queued
        execute_reply's wake-up: the cell then stalled until its timeout)."""

        def sync_state(self):
            pass

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=os.environ.get("YOLO_SM_KERNEL", "python3"),
        resources={"metadata": {"path": str(folder)}},
    )
    client.widget_registry["@jupyter-widgets/output"]["OutputModel"] = OutputArea
    start = time.monotonic()
    if limit is not None:  # no cell waits past the notebook's bound
        client.timeout_func = lambda cell: max(1, min(timeout, start + limit - time.monotonic()))
    # the kernel imports the yolo_sm that renders (a checkout's, not another install's)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(PACKAGE_ROOT), saved)))
    failed = []

    def call():
        try:
            client.execute()
        except BaseException as e:  # handed to the waiting thread
            failed.append(e)

    worker = threading.Thread(target=call, daemon=True)
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    except BaseException:  # a signal: stop the kernel, let nbclient clean up, raise it
        process = getattr(getattr(client.km, "provisioner", None), "process", None)
        if process is not None:
            process.kill()
        worker.join(30)
        raise
    finally:
        os.environ.pop("PYTHONPATH") if saved is None else os.environ.update(PYTHONPATH=saved)
    if failed:
        raise failed[0]
    took = time.monotonic() - start
    if limit is not None and took > limit:
        title = title_of(nb) or "the notebook"
        raise UserError(f"{title} took {took:.0f} s to execute, more than its {limit:.0f} s")
    return nb


def to_html(nb) -> str:
    """The executed notebook as one page of the site."""
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
#: parameters a root cannot set
NOT_FROM_A_ROOT = frozenset({"DATA", "DATA_A", "LIVE"})
_SCALARS = (str, int, float, bool)


def declared_parameters(nb) -> dict:
    """name -> literal default of the ``parameters`` cell (parsed, never run)."""
    out: dict = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "parameters" not in cell.metadata.get("tags", []):
            continue
        for node in ast.parse(cell.source).body:
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                values = node.value.elts if isinstance(target, ast.Tuple) else [node.value]
                for name, value in zip(names, values, strict=False):
                    if not isinstance(name, ast.Name):
                        continue
                    if isinstance(value, ast.Name) and value.id in out:
                        out[name.id] = out[value.id]
                        continue
                    try:
                        out[name.id] = ast.literal_eval(value)
                    except ValueError:
                        pass
    return out


def _fits(value, default) -> bool:
    """Whether ``value`` (from YAML) is a literal of ``default``'s type."""
    kind = type(value)
    if default is None:
        return value is None or kind is str
    if isinstance(default, list):
        return kind is list and all(any(_fits(v, d) for d in default or [""]) for v in value)
    if kind not in _SCALARS or (kind is float and not math.isfinite(value)):
        return False
    return kind is type(default) or (kind is int and type(default) is float)


def root_parameters(root: DataRoot, notebook: str, declared: dict | None = None) -> dict:
    """What the root's parameters file sets for ``notebook`` (by number, then stem), each
    checked against ``declared`` (:func:`declared_parameters`): UserError when it does not fit."""
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
    if declared is None:
        return out
    for name, value in out.items():
        if name in NOT_FROM_A_ROOT or name not in declared:
            takes = ", ".join(sorted(set(declared) - NOT_FROM_A_ROOT)) or "none"
            raise UserError(
                f"{f} sets {str(name)[:40]!r} for {notebook}, which takes none of that name "
                f"from a root (it takes: {takes})"
            )
        if not _fits(value, declared[name]):
            raise UserError(
                f"{f} sets {name} for {notebook} to {str(value)[:40]!r}, not a literal like its "
                f"default {declared[name]!r}"
            )
    return out


def as_root(data: str | os.PathLike | DataRoot) -> DataRoot:
    return data if isinstance(data, DataRoot) else open_root(data)


def _data_value(root: DataRoot) -> str:
    """``DATA``'s value: the root's name when it is under :func:`data_dir`, else its path."""
    if (data_dir() / root.name).resolve() == Path(root.path).resolve():
        return root.name
    return str(root.path)


def inject_parameters(nb, params: dict):
    """Insert a cell tagged ``injected-parameters`` setting ``params`` (papermill style)."""
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
    """Notebook ``path``, with ``DATA`` and the root's parameters injected when ``data`` is set."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    if data is not None:
        root = as_root(data)
        params = root_parameters(root, path.stem, declared_parameters(nb))
        inject_parameters(nb, {"DATA": _data_value(root), **params})
    return nb


def render_site(
    notebooks: str | os.PathLike,
    out: str | os.PathLike,
    timeout: int = 900,
    only: list[str] | None = None,
    data: str | os.PathLike | DataRoot | None = None,
) -> Path:
    """Execute the ``NN_topic.ipynb`` of ``notebooks`` (prefixes ``only``) from root ``data``
    (None: each notebook's own) and write the site into ``out``; returns the index path."""
    root = as_root(data) if data is not None else None
    paths = notebooks_in(notebooks, only)
    prepared = {p: prepare(p, data) for p in paths}
    if root is None:
        root = as_root(default_data(paths[0]))
    executed = {}
    for path, nb in prepared.items():
        t0 = time.perf_counter()
        executed[path.stem] = run(nb, path.parent, timeout)
        print(f"executed {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return write_site(executed, out, root)


def write_site(
    executed: dict, out: str | os.PathLike, root: DataRoot, verdicts: pd.DataFrame | None = None
) -> Path:
    """Write the pages of ``executed`` (stem -> notebook, in reading order), the index and the
    shared assets into ``out`` (:func:`replace_all`); returns the index path."""
    out = Path(out)
    pages = [Page(stem, title_of(nb)) for stem, nb in executed.items()]
    verdicts = catalog.verdict_table(root) if verdicts is None else verdicts
    homes = home_pages(verdicts, pages)
    machine = root.device_name()
    files = site_assets()
    statements = tuple(verdicts.statement)
    for i, page in enumerate(pages):
        prev = pages[i - 1] if i else None
        nxt = pages[i + 1] if i + 1 < len(pages) else None

        def box(heads, page=page):
            findings = next((h for _, h, t in heads if t.lower() == "findings"), None)
            return results_box(verdicts, page, homes, machine, findings)

        shown = set(page_rows(verdicts, page, homes).statement)
        text = page_html(executed[page.stem], page, prev, nxt, box, shown, statements)
        files[page.file] = without_local_paths(text, root)
    first_cells = {
        s: next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
        for s, nb in executed.items()
    }
    files[INDEX] = without_local_paths(index_html(root, pages, verdicts, homes, first_cells), root)
    out.mkdir(parents=True, exist_ok=True)
    replace_all(out, files)
    return out / INDEX


def without_local_paths(text: str, root: DataRoot) -> str:
    """``text`` with the root's folder as its name and this checkout's as ``.``."""
    for folder, name in ((root.path, root.name), (PACKAGE_ROOT, ".")):
        for form in {str(Path(folder)), str(Path(folder).resolve())}:
            text = text.replace(form, name)
    return text


def replace_all(folder: Path, files: dict) -> None:
    """Write ``files`` (name -> text or bytes) into ``folder`` via ``mkstemp`` files renamed
    over their names with SIGINT / SIGTERM blocked: all old or all new, never through a link."""
    made: dict[str, str] = {}
    umask = os.umask(0)
    os.umask(umask)
    try:
        for name, body in files.items():
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
            made[name] = tmp
            os.fchmod(fd, 0o666 & ~umask)  # as a plain open() would make it
            with os.fdopen(fd, "wb") as f:
                f.write(body.encode("utf-8") if isinstance(body, str) else body)
        held = {signal.SIGINT, signal.SIGTERM}
        main = threading.current_thread() is threading.main_thread()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held) if main else None
        try:
            for name in list(made):
                os.replace(made.pop(name), folder / name)
        finally:
            if old is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
    finally:
        for tmp in made.values():
            Path(tmp).unlink(missing_ok=True)


def default_data(path: Path) -> str:
    """The literal ``DATA`` of a notebook's ``parameters`` cell."""
    import nbformat

    data = declared_parameters(nbformat.read(path, as_version=4)).get("DATA")
    if not isinstance(data, str):
        raise UserError(f"{path} sets no DATA in a cell tagged parameters; pass --data")
    return data

"""Executed notebooks, once per test run: the notebook tests and the site test read the same
executions (a notebook takes tens of seconds on 2 cores). Callers must not change what they
get (the site's renderer copies before it edits). Under pytest-xdist the workers of one run
share the executions through files under the run's temporary folder, which pytest removes with
the run's other old ones (the first worker to ask executes; the others wait on its lock and read
the result).

Each execution is bounded: :data:`CELL_S` a cell and :data:`NOTEBOOK_S` the whole notebook
(``yolo_sm.report.render.run``). A stall that runs a cell's wait to its timeout (the explorers'
notebooks once stalled that way for the whole timeout and then read as executed) makes the
notebook pass its bound and fail."""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

#: seconds a cell may take, and a whole notebook (the slowest take about a minute on 2 cores)
CELL_S, NOTEBOOK_S = 240, 240

_EXECUTED: dict = {}
#: the environment variable naming the folder the workers share (set by tests/conftest.py)
SHARED = "YOLO_SM_TEST_NOTEBOOKS"


def _shared(key) -> Path | None:
    """The file this run's workers share ``key``'s execution through (None: one process)."""
    folder = os.environ.get(SHARED)
    if not folder:
        return None
    folder = Path(folder)
    folder.mkdir(exist_ok=True)
    return folder / hashlib.sha1(repr(key).encode()).hexdigest()


def executed(path: Path, data):
    """``path`` executed from the dataset root ``data`` (``yolo_sm.report.render.execute``),
    the same test run's earlier execution when there is one."""
    import nbformat

    from yolo_sm.report.render import execute

    key = (str(Path(path).resolve()), str(data))
    if key in _EXECUTED:
        return _EXECUTED[key]
    file = _shared(key)
    if file is None:
        _EXECUTED[key] = execute(path, timeout=CELL_S, data=data, limit=NOTEBOOK_S)
        return _EXECUTED[key]
    with open(file.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the lock file closes
        if not file.exists():
            nb = execute(path, timeout=CELL_S, data=data, limit=NOTEBOOK_S)
            tmp = file.with_suffix(".tmp")
            nbformat.write(nb, tmp)
            tmp.replace(file)
        _EXECUTED[key] = nbformat.read(file, as_version=4)
    return _EXECUTED[key]

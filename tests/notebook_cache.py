"""Executed notebooks, once per test session: the notebook tests and the site test read the same
executions (a notebook takes tens of seconds on 2 cores). Callers must not change what they
get (the site's renderer copies before it edits).

Each execution is bounded: :data:`CELL_S` a cell and :data:`NOTEBOOK_S` the whole notebook
(``yolo_sm.report.render.run``). A stall that runs a cell's wait to its timeout (the explorers'
notebooks once stalled that way for the whole timeout and then read as executed) makes the
notebook pass its bound and fail."""

from __future__ import annotations

from pathlib import Path

#: seconds a cell may take, and a whole notebook (the slowest take about a minute on 2 cores)
CELL_S, NOTEBOOK_S = 240, 240

_EXECUTED: dict = {}


def executed(path: Path, data):
    """``path`` executed from the dataset root ``data`` (``yolo_sm.report.render.execute``),
    the same test run's earlier execution when there is one."""
    from yolo_sm.report.render import execute

    key = (str(Path(path).resolve()), str(data))
    if key not in _EXECUTED:
        _EXECUTED[key] = execute(path, timeout=CELL_S, data=data, limit=NOTEBOOK_S)
    return _EXECUTED[key]

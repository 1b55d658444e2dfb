"""Executed notebooks, once per test session: the notebook tests and the site test read the same
executions (a notebook takes tens of seconds on 2 cores). Callers must not change what they
get (the site's renderer copies before it edits)."""

from __future__ import annotations

from pathlib import Path

_EXECUTED: dict = {}


def executed(path: Path, data):
    """``path`` executed from the dataset root ``data`` (``yolo_sm.report.render.execute``),
    the same test run's earlier execution when there is one."""
    from yolo_sm.report.render import execute

    key = (str(Path(path).resolve()), str(data))
    if key not in _EXECUTED:
        _EXECUTED[key] = execute(path, timeout=600, data=data)
    return _EXECUTED[key]

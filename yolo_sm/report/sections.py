"""Sections that need datasets: without them, :func:`needs` returns one :class:`Note` line."""

from __future__ import annotations

import functools

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.plots import lacks
from yolo_sm.report.tables import md


class Note(str):
    """One line for a notebook cell; renders as Markdown."""

    def _repr_markdown_(self) -> str:
        return str(self)


def missing_note(root: DataRoot, names) -> Note:
    """:func:`~yolo_sm.report.plots.lacks` as a Markdown line (dataset text escaped)."""
    return Note(md(lacks(root, names)))


def needs(*names: str, any_of: bool = False):
    """Decorator: ``fn(root, ...)`` runs if ``root`` holds ``names`` (with ``any_of``: one of
    them), else :func:`missing_note`."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(root: DataRoot, *args, **kwargs):
            missing = [n for n in names if not root.has(n)]
            if missing and (not any_of or len(missing) == len(names)):
                return missing_note(root, missing)
            return fn(root, *args, **kwargs)

        return inner

    return wrap


def section(name: str, *steps):
    """A section of the dataset ``name``: ``root.load(name)`` through ``steps`` in turn (the
    last makes the table or figure), or :func:`missing_note`."""

    @needs(name)
    def shown(root: DataRoot):
        return functools.reduce(lambda x, step: step(x), steps, root.load(name))

    return shown

"""The topics: one folder per notebook question, and the one registry of them.

Each ``yolo_sm/topics/<name>/__init__.py`` declares its :class:`Topic` as pure data (no pandas,
no torch); :data:`ALL` lists them. Everything else (the rule catalogue, the site's headlines,
the plan's step kinds) is derived from :data:`ALL`, never appended to from another module.
Callables are named as ``"module:attribute"`` inside the topic's folder and imported on use
(:meth:`Topic.load`), so reading the registry stays light.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class Topic:
    """One question. ``sources``: ``("rules:RULES", "analyse:facts")`` pairs (a rule set and
    the facts function ``DataRoot -> facts`` it reads); ``pair_sources`` the same over two
    roots (``(a, b) -> facts``); ``headlines``: per notebook, the rule ids that answer its
    question, in reading order (the first is the site index's line for the page)."""

    name: str
    notebooks: tuple[str, ...]
    question: str
    sources: tuple[tuple[str, str], ...] = ()
    pair_sources: tuple[tuple[str, str], ...] = ()
    headlines: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "headlines", MappingProxyType(dict(self.headlines)))
        unknown = set(self.headlines) - set(self.notebooks)
        if unknown:
            raise ValueError(f"topic {self.name}: headlines for notebooks it lacks: {unknown}")

    def load(self, ref: str):
        """The attribute ``"module:attribute"`` of this topic's folder."""
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(f"{__name__}.{self.name}.{module}"), attr)


def _all() -> tuple[Topic, ...]:
    names = (
        "primer", "width", "precision", "batch", "heatmaps", "timeline", "roofline", "memory",
        "launches", "claims", "deploy", "your_model", "compare", "techniques", "wide_deep",
        "resolutions", "monitor", "sharing",
    )  # fmt: skip
    return tuple(importlib.import_module(f"{__name__}.{n}").TOPIC for n in names)


#: every topic, in notebook order
ALL: tuple[Topic, ...] = _all()


def headlines() -> dict[str, tuple[str, ...]]:
    """Notebook (or group) -> the rule ids its page leads with."""
    return {nb: ids for t in ALL for nb, ids in t.headlines.items()}


__all__ = ["ALL", "Topic", "headlines"]

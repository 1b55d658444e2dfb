"""The topics: one folder per notebook question, and the one registry of them.

Each ``yolo_sm/topics/<name>/__init__.py`` declares its :class:`Topic` as pure data (no pandas,
no torch); :data:`ALL` lists them. Everything else (the rule catalogue, the site's headlines,
the plan's step kinds: :data:`STEPS`) is derived from :data:`ALL`, never appended to from
another module. Callables are named as ``"module:attribute"`` inside the topic's folder (or
``"yolo_sm.module:attribute"``) and imported on use (:func:`load`), so reading the registry
stays light.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from yolo_sm.contract.steps import GENERIC


@dataclass(frozen=True)
class Topic:
    """One question. ``sources``: ``("rules:RULES", "analyse:facts")`` pairs (a rule set and
    the facts function ``DataRoot -> facts`` it reads); ``pair_sources`` the same over two
    roots (``(a, b) -> facts``); ``headlines``: per notebook, the rule ids that answer its
    question, in reading order (the first is the site index's line for the page); ``steps``:
    the plan step kinds it collects, kind -> (its frozen spec class, its runner's ref)."""

    name: str
    notebooks: tuple[str, ...]
    question: str
    sources: tuple[tuple[str, str], ...] = ()
    pair_sources: tuple[tuple[str, str], ...] = ()
    headlines: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    steps: Mapping[str, tuple[type, str]] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "headlines", MappingProxyType(dict(self.headlines)))
        unknown = set(self.headlines) - set(self.notebooks)
        if unknown:
            raise ValueError(f"topic {self.name}: headlines for notebooks it lacks: {unknown}")

    def load(self, ref: str):
        """The attribute ``"module:attribute"`` of this topic's folder."""
        return load(ref, f"{__name__}.{self.name}")


def load(ref: str, package: str = "yolo_sm"):
    """The attribute of ``"module:attribute"``: a module under ``package``, or an absolute
    ``yolo_sm.`` one."""
    module, _, attr = ref.partition(":")
    module = module if module.startswith("yolo_sm.") else f"{package}.{module}"
    return getattr(importlib.import_module(module), attr)


def _all() -> tuple[Topic, ...]:
    names = (
        "primer", "width", "precision", "batch", "heatmaps", "timeline", "roofline", "memory",
        "launches", "claims", "deploy", "your_model", "compare", "techniques", "wide_deep",
        "resolutions", "monitor", "sharing",
    )  # fmt: skip
    return tuple(importlib.import_module(f"{__name__}.{n}").TOPIC for n in names)


#: every topic, in notebook order
ALL: tuple[Topic, ...] = _all()


def _steps() -> dict[str, tuple[type, str]]:
    out = dict(GENERIC)
    for t in ALL:
        clash = set(out) & set(t.steps)
        if clash:
            raise ValueError(f"topic {t.name} declares step kinds declared before: {clash}")
        out.update(t.steps)
    return out


#: every step kind: kind -> (its spec class, its runner as "yolo_sm.module:function")
STEPS: dict[str, tuple[type, str]] = _steps()


def headlines() -> dict[str, tuple[str, ...]]:
    """Notebook (or group) -> the rule ids its page leads with."""
    return {nb: ids for t in ALL for nb, ids in t.headlines.items()}


__all__ = ["ALL", "STEPS", "Topic", "headlines", "load"]

"""The topics: one folder per notebook question, and :data:`ALL`, the one registry of them.
Callables are named ``"module:attribute"`` and imported on use (:func:`load`)."""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from yolo_sm.contract.steps import GENERIC


@dataclass(frozen=True)
class Topic:
    """One question: ``sources`` (rules file in its folder, facts function) refs (by default
    its rules.toml and analyse.facts), ``pair_sources`` over two roots, ``headlines`` per
    notebook (rule ids, in reading order; by default its rules file's ``headlines``),
    ``steps`` (kind -> spec, runner; or spec classes)."""

    name: str
    notebooks: tuple[str, ...]
    question: str
    sources: tuple[tuple[str, str], ...] = (("rules.toml", "analyse:facts"),)
    pair_sources: tuple[tuple[str, str], ...] = ()
    headlines: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    steps: Mapping[str, tuple[type, str]] | tuple[type, ...] = field(default_factory=dict)

    def __post_init__(self):
        heads = self.headlines or self._rules_headlines()
        object.__setattr__(self, "headlines", MappingProxyType(dict(heads)))
        if not isinstance(self.steps, Mapping):  # spec classes, each run by run_<its kind>
            steps = {c.kind: (c, f"yolo_sm.core.plan_runners:run_{c.kind}") for c in self.steps}
            object.__setattr__(self, "steps", steps)
        unknown = set(self.headlines) - set(self.notebooks)
        if unknown:
            raise ValueError(f"topic {self.name}: headlines for notebooks it lacks: {unknown}")

    def _rules_headlines(self) -> dict[str, tuple[str, ...]]:
        """Its first rules file's ``headlines``, under the file's ``group`` (else its notebook)."""
        files = [f for f, _ in (*self.sources, *self.pair_sources)]
        if not files:
            return {}
        doc = tomllib.loads((Path(__file__).parent / self.name / files[0]).read_text("utf-8"))
        heads = tuple(doc.get("headlines", ()))
        return {doc.get("group", self.notebooks[0]): heads} if heads else {}

    def load(self, ref: str):
        """The attribute ``"module:attribute"`` of this topic's folder."""
        return load(ref, f"{__name__}.{self.name}")


def load(ref: str, package: str = "yolo_sm"):
    """The attribute ``"module:attribute"`` of a module under ``package`` (or ``yolo_sm.``)."""
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

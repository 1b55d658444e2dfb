"""Headline findings of the timeline notebook, as rules over the facts of its analysis module."""

from __future__ import annotations

from yolo_sm.report.rules import Rule

#: One rule per headline finding (see :class:`yolo_sm.report.rules.Rule`).
RULES: tuple[Rule, ...] = ()

"""Wall seconds of one phase of a measurement, for a row's ``build_s``, ``warmup_s``,
``timed_s`` or ``profile_s``."""

from __future__ import annotations

import contextlib
import time

#: the phases a row records, each as its ``<phase>_s`` column
PHASES = ("build", "warmup", "timed", "profile")


class Lap:
    """The seconds a :func:`phase` block took (0 until it ends)."""

    seconds: float = 0.0


@contextlib.contextmanager
def phase(name: str):
    """Time the block as phase ``name`` (one of :data:`PHASES`); yields a :class:`Lap`."""
    if name not in PHASES:
        raise ValueError(f"unknown phase {name!r}")
    lap = Lap()
    t0 = time.perf_counter()
    try:
        yield lap
    finally:
        lap.seconds = time.perf_counter() - t0

"""Wall seconds per phase of a collection (building engines, warming up, timed calls, profiler
passes), measured with ``time.perf_counter`` where the work happens.

:func:`phase` times a block and hands back its seconds (for a row's ``build_s``, ``warmup_s``
...); every :func:`ledger` open at the time adds them to its phase. Only the outermost phase
counts in a ledger, so that a build that warms up inside it is not counted twice.
"""

from __future__ import annotations

import contextlib
import time

from yolo_sm.contract.gpu_time import PHASES, record


class Lap:
    """The seconds a :func:`phase` block took (0 until it ends)."""

    seconds: float = 0.0


class Ledger:
    """Seconds per phase of everything timed while it is open, and its own wall time."""

    def __init__(self) -> None:
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.start = time.perf_counter()
        self.end: float | None = None

    def record(self) -> dict:
        """The ``gpu_seconds`` record so far (:func:`yolo_sm.contract.gpu_time.record`)."""
        end = self.end if self.end is not None else time.perf_counter()
        return record(self.phases, end - self.start)


_LEDGERS: list[Ledger] = []
_DEPTH = [0]


@contextlib.contextmanager
def phase(name: str):
    """Time the block as phase ``name`` (one of :data:`PHASES`); yields a :class:`Lap`."""
    if name not in PHASES:
        raise ValueError(f"unknown phase {name!r}")
    lap = Lap()
    _DEPTH[0] += 1
    t0 = time.perf_counter()
    try:
        yield lap
    finally:
        lap.seconds = time.perf_counter() - t0
        _DEPTH[0] -= 1
        if _DEPTH[0] == 0:
            for led in _LEDGERS:
                led.phases[name] += lap.seconds


@contextlib.contextmanager
def ledger():
    """A :class:`Ledger` collecting the phases timed inside the block."""
    led = Ledger()
    _LEDGERS.append(led)
    try:
        yield led
    finally:
        led.end = time.perf_counter()
        _LEDGERS.remove(led)


def credit(name: str, seconds: float) -> None:
    """Add ``seconds`` of phase ``name`` timed elsewhere (a child process's own phases) to the
    open ledgers, unless a phase is being timed here (it counts them already)."""
    if name not in PHASES:
        raise ValueError(f"unknown phase {name!r}")
    if _DEPTH[0] == 0:
        for led in _LEDGERS:
            led.phases[name] += float(seconds)

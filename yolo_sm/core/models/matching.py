"""Models of equal cost: the width (or depth) whose FLOPs per image match a target, by bisection
over :func:`~yolo_sm.core.models.tables.model_flops` counted at a small input (FLOPs scale with
pixels exactly)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from yolo_sm.contract.errors import UserError
from yolo_sm.core.models.common import MAX_WIDTH, MIN_WIDTH
from yolo_sm.core.models.tables import model_flops
from yolo_sm.core.models.yolo import build_yolo

#: relative FLOPs miss a matched pair may have (5 %)
TOLERANCE = 0.05


@dataclass(frozen=True)
class Match:
    """A model found for a FLOPs target: its width and depth, its FLOPs per image at the
    counting size, and ``rel_diff`` = flops / target - 1."""

    width: float
    depth: float
    flops: int
    target: int
    rel_diff: float


def yolo_flops(family: str, width: float, depth: float, imgsz: int = 64, max_channels=2048) -> int:
    """FLOPs per image (2 per multiply-add) of a YOLO of ``family`` at ``width`` and ``depth``
    at a square ``imgsz`` input (random weights, no BN calibration: nothing is computed)."""
    m = build_yolo(
        family, float(width), depth=float(depth), max_channels=max_channels, calibrate=False
    )
    return model_flops(m, imgsz)


def match_flops(
    target: int,
    *,
    family: str = "yolov8",
    width: float | None = None,
    depth: float | None = None,
    imgsz: int = 64,
    tolerance: float = TOLERANCE,
    steps: int = 14,
    bounds: tuple[float, float] | None = None,
    flops=yolo_flops,
) -> Match:
    """The ``family`` model whose FLOPs per image come nearest ``target``: search width (given
    ``depth``, 1/1000 steps) or depth (given ``width``, 1/100 steps) within ``bounds``; a miss
    beyond ``tolerance`` (relative) is a UserError naming the closest model."""
    if (width is None) == (depth is None):
        raise UserError("match_flops searches one of width and depth: give exactly the other")
    if not target > 0:
        raise UserError(f"the FLOPs target must be positive, got {target!r}")
    lo, hi, digits = (MIN_WIDTH, MAX_WIDTH, 3) if width is None else (0.01, 4.0, 2)

    def count(v):
        return flops(family, v, depth, imgsz) if width is None else flops(family, width, v, imgsz)

    if bounds is not None:
        blo, bhi = (float(b) for b in bounds)
        if not lo <= blo < bhi <= hi:
            raise UserError(f"search bounds must lie in [{lo:g}, {hi:g}], got {bounds!r}")
        lo, hi = blo, bhi
    seen: dict[float, int] = {}

    def at(v: float) -> int:
        v = min(max(round(v, digits), lo), hi)
        if v not in seen:
            seen[v] = int(count(v))
        return seen[v]

    if at(lo) <= target <= at(hi):  # else out of range: the nearer end is the best there is
        a, b = lo, hi
        for _ in range(steps):
            mid = min(max(round((a + b) / 2, digits), lo), hi)
            if mid in (a, b):
                break
            if at(mid) < target:
                a = mid
            else:
                b = mid
    best = min(seen, key=lambda v: (abs(seen[v] / target - 1), v))
    rel = seen[best] / target - 1
    w, d = (best, float(depth)) if width is None else (float(width), best)
    if not math.isfinite(rel) or abs(rel) > tolerance:
        raise UserError(
            f"no {family} model within {tolerance:.0%} of {target / 1e9:.3g} GFLOPs at "
            f"{'depth ' + format(d, 'g') if width is None else 'width ' + format(w, 'g')}: the "
            f"nearest (width {w:g}, depth {d:g}) is {rel:+.1%}"
        )
    return Match(w, d, seen[best], int(target), rel)

"""How should two models share one GPU?"""

import re
from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import one_backend, one_layout, one_precision
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic

#: one side of a sharing pair: ``WIDTHxBATCH`` (``1.0x16``)
_SIDE = re.compile(r"(?P<width>[0-9]*\.?[0-9]+)x(?P<batch>[0-9]{1,6})")


def parse_pair(text: str, what: str = "pair") -> tuple[tuple[float, int], tuple[float, int]]:
    """``"1.0x16+0.25x1"`` -> ``((1.0, 16), (0.25, 1))``: (width, batch) of engines a and b."""
    sides = str(text).replace(" ", "").split("+")
    parsed = [_SIDE.fullmatch(s) for s in sides]
    if len(sides) != 2 or not all(parsed):
        raise UserError(
            f"{what} must be two WIDTHxBATCH joined by '+' (1.0x16+0.25x1), got {text!r}"
        )
    a, b = (
        (v.multiplier(m["width"], f"{what} width"), v.batch(m["batch"], f"{what} batch"))
        for m in parsed
    )
    return a, b


@dataclass(frozen=True)
class SharingStep(Spec):
    """Two engines at once, alone, on two streams and in two processes (None: the default)."""

    kind = "sharing"
    pairs: tuple | None = param(lambda x, w: [parse_pair(t, w) for t in v.texts(x, w)], None)
    family: str | None = param(v.text, None)
    precision: str | None = param(one_precision, None)
    layout: str | None = param(one_layout, None)
    backend: str | None = param(one_backend, None)
    imgsz: int | None = param(v.imgsz, None)
    seconds: float | None = param(v.run_s, None)
    gap_s: float | None = param(v.gap_s, None)
    depth: int | None = param(v.check(v.whole, lo=1, hi=16), None)
    hz: float | None = param(v.check(v.number, above=0, hi=1000, unit="Hz"), None)
    processes: bool | None = param(v.flag, None)
    trace_s: float | None = param(v.check(v.number, lo=0, hi=10, unit="s"), None)


TOPIC = Topic(
    name="sharing",
    notebooks=("17_two_models",),
    question="How should two models share one GPU?",
    steps=(SharingStep,),
)

"""One engine per resolution or one dynamic engine?"""

import re
from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import one_layout, one_precision
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic


def frame_sizes(x, what):
    """Frame sizes WIDTHxHEIGHT (1280x720), each side 1 to MAX_IMGSZ pixels."""
    out = []
    for f in v.texts(x, what):
        m = re.fullmatch(r"(\d+)x(\d+)", f.strip().lower())
        if not m or not all(1 <= int(g) <= v.MAX_IMGSZ for g in m.groups()):
            raise UserError(f"{what} are WIDTHxHEIGHT sizes such as 1280x720, got {f!r}")
        out.append(f"{int(m[1])}x{int(m[2])}")
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class ResolutionStep(Spec):
    """Fixed-shape engines per frame size against dynamic ones, at one batch."""

    kind = "resolutions"
    widths: tuple = param(v.multipliers, (0.5, 1.0))
    family: str = param(v.text, "yolov8")
    depth: float = param(v.check(v.number, above=0, hi=4), 0.33)
    batch: int = param(v.batch, 8)
    frames: tuple = param(frame_sizes, ("640x640", "1280x720", "1920x1080"))
    fixed_backend: str = param(
        v.check(v.text, choices=("eager", "cudagraph", "compile")), "cudagraph"
    )
    dynamic: tuple = param(v.check(v.texts, choices=("eager", "compile")), ("eager",))
    precision: str = param(one_precision, "fp16")
    layout: str = param(one_layout, "nhwc")
    device: str = param(v.device_name, "cuda")
    warmup_ms: float = param(v.warmup_ms, 50.0)
    budget_ms: float = param(v.budget_ms, 150.0)
    check: bool = param(v.flag, True)


TOPIC = Topic(
    name="resolutions",
    notebooks=("15_resolutions",),
    question="One engine per resolution or one dynamic engine?",
    steps=(ResolutionStep,),
)

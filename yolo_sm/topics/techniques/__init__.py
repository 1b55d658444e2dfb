"""What do fusion, autocast and a preallocated buffer buy?"""

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic

RESNET_DEPTHS = (18, 34, 50, 101, 152)


def resnet_depth(x, what):
    depth = v.whole(x, what, lo=18, hi=152)
    if depth not in RESNET_DEPTHS:
        raise UserError(f"{what} must be one of {', '.join(map(str, RESNET_DEPTHS))}, got {depth}")
    return depth


@dataclass(frozen=True)
class TechniquesStep(Spec):
    """Fusion, autocast and the batch buffer side by side (None: the collector's default)."""

    kind = "techniques"
    techniques: tuple | None = param(
        v.check(v.texts, choices=("fusion", "autocast", "batch_buffer")), None
    )
    backends: tuple | None = param(v.check(v.texts, choices=("eager", "cudagraph")), None)
    resnet_depth: int | None = param(resnet_depth, None)
    resnet_imgsz: int | None = param(v.imgsz, None)
    resnet_batches: tuple | None = param(v.batches, None)
    widths: tuple | None = param(v.multipliers, None)
    autocast_batches: tuple | None = param(v.batches, None)
    buffer_width: float | None = param(v.multiplier, None)
    buffer_batches: tuple | None = param(v.batches, None)
    imgsz: int | None = param(v.imgsz, None)
    warmup_ms: float | None = param(v.warmup_ms, None)
    budget_ms: float | None = param(v.budget_ms, None)
    profile_iters: int | None = param(v.check(v.whole, lo=1, hi=20), None)


TOPIC = Topic(
    name="techniques",
    notebooks=("13_techniques",),
    question="What do fusion, autocast and a preallocated buffer buy?",
    steps=(TechniquesStep,),
)

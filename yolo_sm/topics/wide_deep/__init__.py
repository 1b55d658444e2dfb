"""Wider or deeper at the same FLOPs: which uses the SMs better?"""

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import backend_names, one_layout, one_precision
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic


def wide_deep_pairs(x, what):
    """((wide width, wide depth), (deep width, deep depth)) per pair, from four numbers."""
    items = x if isinstance(x, (list, tuple)) else [x]
    if not items:
        raise UserError(f"{what} needs at least one pair")
    out = []
    for p in items:
        flat = (
            [n for part in p for n in (part if isinstance(part, (list, tuple)) else [part])]
            if isinstance(p, (list, tuple))
            else [p]
        )
        nums = v.multipliers(flat, what)
        if len(nums) != 4:
            raise UserError(
                f"each of {what} is [wide_width, wide_depth, deep_width, deep_depth], got {p!r}"
            )
        out.append(((nums[0], nums[1]), (nums[2], nums[3])))
    return out


@dataclass(frozen=True)
class WideDeepStep(Spec):
    """FLOPs-matched wide and deep pairs, each timed at every backend and batch."""

    kind = "wide_vs_deep"
    pairs: tuple = param(wide_deep_pairs, (((0.5, 0.33), (0.371, 1.0)),))
    family: str = param(v.text, "yolov8")
    backends: tuple = param(backend_names, ("eager", "cudagraph"))
    batches: tuple = param(v.batches, (1, 16, 64))
    precision: str = param(one_precision, "fp16")
    layout: str = param(one_layout, "nhwc")
    imgsz: int = param(v.imgsz, 640)
    device: str = param(v.device_name, "cuda")
    warmup_ms: float = param(v.warmup_ms, 50.0)
    budget_ms: float = param(v.budget_ms, 150.0)
    tolerance: float = param(v.check(v.number, above=0, hi=0.5), 0.05)  # FLOPs match
    occupancy: bool = param(v.flag, True)  # the Kineto pass per point
    check: bool = param(v.flag, True)


TOPIC = Topic(
    name="wide_deep",
    notebooks=("14_wide_or_deep",),
    question="Wider or deeper at the same FLOPs: which uses the SMs better?",
    steps=(WideDeepStep,),
)

"""Wide or deep, and which input sizes, use the SMs best?"""

import re
from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import backend_names, one_layout, one_precision
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic

RUN = "yolo_sm.core.plan_runners:"


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


@dataclass(frozen=True)
class ResolutionStep(Spec):
    """Fixed-shape engines per frame size (``"WxH"``) against dynamic ones, at one batch."""

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
    name="shapes",
    notebooks=("14_wide_or_deep", "15_resolutions"),
    question="Wide or deep, and which input sizes, use the SMs best?",
    sources=(("rules:RULES", "analyse:facts"),),
    steps={
        "wide_vs_deep": (WideDeepStep, RUN + "run_wide_vs_deep"),
        "resolutions": (ResolutionStep, RUN + "run_resolutions"),
    },
    pair_sources=(),
    headlines={
        "14_wide_or_deep": (
            "shapes_wide_faster_b64",
            "shapes_deep_more_kernels",
            "shapes_wide_higher_occupancy",
        ),
        "15_resolutions": (
            "shapes_dynamic_cost_small",
            "shapes_nearest_engine_pays",
            "shapes_large_inputs_fill_gpu",
        ),
    },
)

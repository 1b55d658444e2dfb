"""How much activation memory does a forward need?"""

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.steps import model_entries, one_layout, one_precision
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic


@dataclass(frozen=True)
class LifetimesStep(Spec):
    """Activation lifetimes per layer of each model's forward (None: the collector's default)."""

    kind = "memory_lifetimes"
    models: tuple | None = param(model_entries("widths"), None)
    batch: int | None = param(v.batch, None)
    imgsz: int | None = param(v.imgsz, None)
    precision: str | None = param(one_precision, None)
    layout: str | None = param(one_layout, None)


@dataclass(frozen=True)
class PoolStep(Spec):
    """Random batch sizes through one model per allocator configuration of ``confs``."""

    kind = "memory_pool"
    family: str | None = param(v.text, None)
    width: float | None = param(v.multiplier, None)
    forwards: int | None = param(v.check(v.whole, lo=1, hi=100_000), None)
    batch_min: int | None = param(v.batch, None)
    batch_max: int | None = param(v.batch, None)
    seed: int | None = param(v.seed, None)
    cudnn_benchmark: bool | None = param(v.flag, None)
    confs: tuple | None = param(v.texts, None)
    timeout_s: float | None = param(v.run_s, None)
    imgsz: int | None = param(v.imgsz, None)
    precision: str | None = param(one_precision, None)
    layout: str | None = param(one_layout, None)


TOPIC = Topic(
    name="memory",
    notebooks=("07_memory_and_layout",),
    question="How much activation memory does a forward need?",
    steps=(LifetimesStep, PoolStep),
)

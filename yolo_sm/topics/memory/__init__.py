"""How much activation memory does a forward need?"""

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import one_layout, one_precision
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic


def lifetime_entries(x, what):
    """memory_lifetimes' ``models``: mappings with ``model`` and optional ``widths``."""
    entries = x if isinstance(x, (list, tuple)) else [x]
    if not entries:
        raise UserError(f"{what} needs at least one model")
    for e in entries:
        unknown = sorted(set(v.mapping(e, what)) - {"model", "widths"})
        if "model" not in e or unknown:
            raise UserError(
                f"each entry of {what} needs 'model' and may have widths"
                + (f"; unknown {', '.join(unknown)}" if unknown else "")
            )
        v.text(e["model"], f"{what} model")
        if "widths" in e:
            v.multipliers(e["widths"], f"{what} widths")
    return entries


@dataclass(frozen=True)
class LifetimesStep(Spec):
    """Activation lifetimes per layer of each model's forward (None: the collector's default)."""

    kind = "memory_lifetimes"
    models: tuple | None = param(lifetime_entries, None)
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
    headlines=(
        "memory_peak_predicted",
        "memory_expandable_lowers_peak",
        "roofline_nchw_transforms",
    ),
)

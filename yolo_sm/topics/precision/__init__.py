"""What do fp16, bf16 and 8-bit buy over fp32?"""

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import one_layout, one_precision, precision_names
from yolo_sm.contract.values import Spec, param
from yolo_sm.contract.vocab import INT8_CALIBRATIONS, INT8_CONV_KERNELS, INT8_MODEL_KERNELS
from yolo_sm.topics import Topic


@dataclass(frozen=True)
class NumericsStep(Spec):
    """Numerical error per width and precision, on random inputs and the bundled photos, and
    box agreement after NMS (None: the collector's default)."""

    kind = "numerics"
    widths: tuple | None = param(v.multipliers, None)
    family: str | None = param(v.text, None)
    precisions: tuple | None = param(precision_names, None)
    photo_precisions: tuple | None = param(precision_names, None)
    box_precisions: tuple | None = param(precision_names, None)
    box_reference: str | None = param(one_precision, None)
    imgsz: int | None = param(v.imgsz, None)
    photo_imgsz: int | None = param(v.imgsz, None)
    batch: int | None = param(v.batch, None)
    seeds: tuple | None = param(v.check(v.wholes, lo=0, hi=2**32 - 1), None)
    layout: str | None = param(one_layout, None)
    device: str | None = param(v.device_name, None)
    int8_calibrations: tuple | None = param(v.check(v.texts, choices=INT8_CALIBRATIONS), None)
    int8_percentile: float | None = param(v.check(v.number, lo=50, hi=100), None)
    class_priors: tuple | None = param(lambda x, w: [v.flag(b, w) for b in v.items(x, w)], None)


def kernels(choices):
    """Kernel names of ``choices``; an empty list skips that scope."""
    return lambda x, what: [] if x in ([], ()) else v.texts(x, what, choices)


@dataclass(frozen=True)
class Int8KernelStep(Spec):
    """Widths of ``family`` at ``batch`` x ``imgsz``: ``conv_kernels`` per convolution,
    ``model_kernels`` as whole CUDA-graph engines (empty: skip that scope)."""

    kind = "int8_kernels"
    widths: tuple = param(v.multipliers, (0.5, 1.0, 2.0))
    family: str = param(v.text, "yolov8")
    batch: int = param(v.batch, 64)
    imgsz: int = param(v.imgsz, 640)
    device: str = param(v.device_name, "cuda")
    conv_kernels: tuple = param(kernels(INT8_CONV_KERNELS), INT8_CONV_KERNELS)
    model_kernels: tuple = param(kernels(INT8_MODEL_KERNELS), INT8_MODEL_KERNELS)
    warmup_ms: float = param(v.warmup_ms, 20.0)  # per convolution and kernel (engines: 10x)
    budget_ms: float = param(v.budget_ms, 60.0)

    def validated(self):
        if not self.device.startswith("cuda"):
            raise UserError("int8_kernels times GPU kernels: device must be cuda[:N]")
        if not (self.conv_kernels or self.model_kernels):
            raise UserError("int8_kernels needs conv_kernels or model_kernels")
        return self

    def units(self) -> list[tuple[float, str]]:
        """(width, scope) in run order: each width's convolutions, then its engines."""
        scopes = [s for s, k in (("conv", self.conv_kernels), ("model", self.model_kernels)) if k]
        return [(w, s) for w in self.widths for s in scopes]


TOPIC = Topic(
    name="precision",
    notebooks=("02_precision",),
    question="What do fp16, bf16 and 8-bit buy over fp32?",
    steps=(NumericsStep, Int8KernelStep),
)

"""What should I deploy on this GPU, and how far from the hardware is it?"""

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import one_layout, one_precision
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic

RUN = "yolo_sm.core.plan_runners:"


@dataclass(frozen=True)
class ProbeStep(Spec):
    """A frames-to-boxes batch stage by stage, ``reps`` times."""

    kind = "probe"
    family: str | None = param(v.text, None)
    width: float | None = param(v.multiplier, None)
    batch: int | None = param(v.batch, None)
    reps: int | None = param(v.check(v.whole, lo=1, hi=100_000), None)
    imgsz: int | None = param(v.imgsz, None)
    frames: str | None = param(v.text, None)


def cache_modes(x, what):
    """Compile modes built at every width, or a mapping from a width to its modes."""
    if not isinstance(x, dict):
        return [v.compile_mode(m, what) for m in v.items(x, what)]
    if not x:
        raise UserError(f"{what} names no width")
    return {
        v.multiplier(w, f"{what} width"): tuple(
            v.compile_mode(m, f"{what} at width {w}") for m in v.items(ms, f"{what} at width {w}")
        )
        for w, ms in x.items()
    }


def mode_seconds(x, what):
    """A mapping from a compile mode to the seconds a unit of it takes."""
    if not isinstance(x, dict) or not x:
        raise UserError(f"{what} must map compile modes to seconds, e.g. {{max-autotune: 560}}")
    return tuple((v.compile_mode(m, what), v.seconds(s, f"{what} of {m}")) for m, s in x.items())


@dataclass(frozen=True)
class CacheStep(Spec):
    """Cold and warm torch.compile builds per (width, mode): ``modes`` at every width of
    ``widths``, or ``modes`` as a mapping from width to its modes (then no ``widths``)."""

    kind = "compile_cache"
    family: str = param(v.text, "yolov8")
    widths: tuple = param(v.multipliers, (0.5,))
    batch: int = param(v.batch, 64)
    modes: tuple = param(cache_modes, ("default",))
    precision: str = param(one_precision, "fp16")
    layout: str = param(one_layout, "nhwc")
    imgsz: int = param(v.imgsz, 640)
    device: str = param(v.device_name, "cuda")
    warmup_ms: float = param(v.warmup_ms, 50.0)
    budget_ms: float = param(v.budget_ms, 300.0)
    timeout_s: float = param(v.run_s, 600.0)
    mode_est_s: tuple = param(mode_seconds, ())
    width_modes: tuple = ()  # (width, modes) pairs of a per-width ``modes``

    def validated(self):
        if not isinstance(self.modes, dict):
            return self
        if self.widths != CacheStep.widths:
            raise UserError(
                "compile-cache modes given per width name their widths: leave widths out"
            )
        per = tuple(self.modes.items())
        return type(self)(
            **{**vars(self), "widths": tuple(w for w, _ in per), "modes": (), "width_modes": per}
        )

    def units(self) -> list[tuple[float, str]]:
        """The (width, compile mode) pairs in build order."""
        own = dict(self.width_modes)
        widths = list(self.widths) + [w for w in own if w not in self.widths]
        return [(float(w), m) for w in widths for m in own.get(w, self.modes)]


TOPIC = Topic(
    name="deploy",
    notebooks=("10_fast_engines",),
    question="What should I deploy on this GPU, and how far from the hardware is it?",
    sources=(("rules.toml", "analyse:facts"),),
    steps={
        "probe": (ProbeStep, RUN + "run_probe"),
        "compile_cache": (CacheStep, RUN + "run_compile_cache"),
    },
    headlines={
        "10_fast_engines": (
            "fast_b1_speedup",
            "fast_b64_speedup",
            "fast_pipeline_beats_predict",
        ),
    },
)

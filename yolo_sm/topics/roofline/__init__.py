"""Is a layer bound by compute, memory or launches?"""

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.values import Spec, param
from yolo_sm.topics import Topic


@dataclass(frozen=True)
class CeilingsStep(Spec):
    """Matmul peaks per precision at matrix sizes ``n``, copy bandwidths over ``copy_bytes``."""

    kind = "ceilings"
    n: tuple | None = param(v.check(v.wholes, lo=1, hi=65_536), None)
    copy_bytes: int | None = param(v.check(v.whole, lo=1, hi=1 << 40, unit="bytes"), None)
    budget_ms: float | None = param(v.budget_ms, None)
    fill: str | None = param(v.check(v.text, choices=("randn", "zeros")), None)


TOPIC = Topic(
    name="roofline",
    notebooks=("06_roofline",),
    question="Is a layer bound by compute, memory or launches?",
    steps=(CeilingsStep,),
)

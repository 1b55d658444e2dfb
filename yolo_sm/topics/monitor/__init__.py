"""What do live GPU counters say about the SMs?"""

from dataclasses import dataclass

from yolo_sm.contract import values as v
from yolo_sm.contract.steps import BenchStep
from yolo_sm.contract.values import param
from yolo_sm.topics import Topic


@dataclass(frozen=True)
class MonitorStep(BenchStep):
    """A bench (its params) under the live monitor: samples every ``interval`` s on
    ``/metrics`` at 127.0.0.1:``port`` (0: a free one), ``idle_s`` of idle before and after."""

    kind = "monitor"
    interval: float = param(v.check(v.number, lo=0.2, hi=60, unit="s"), 1.0)
    port: int = param(v.check(v.whole, lo=0, hi=65535), 0)
    idle_s: float = param(v.check(v.number, lo=0, hi=60, unit="s"), 2.0)


TOPIC = Topic(
    name="monitor",
    notebooks=("16_live_monitoring",),
    question="What do live GPU counters say about the SMs?",
    steps=(MonitorStep,),
)

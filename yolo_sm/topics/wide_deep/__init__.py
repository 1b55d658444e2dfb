"""Wider or deeper at the same FLOPs: which uses the SMs better?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="wide_deep",
    notebooks=("14_wide_or_deep",),
    question="Wider or deeper at the same FLOPs: which uses the SMs better?",
    sources=(("rules:RULES", "analyse:facts"),),
    headlines={
        "14_wide_or_deep": (
            "wide_deep_wide_faster_b64",
            "wide_deep_wide_faster_b1_eager",
            "wide_deep_wide_higher_occupancy",
        )
    },
)

"""How should two models share one GPU?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="sharing",
    notebooks=("17_two_models",),
    question="How should two models share one GPU?",
    sources=(("rules:RULES", "analyse:facts"),),
    headlines={
        "17_two_models": (
            "sharing_streams_total",
            "sharing_small_p99_streams",
            "sharing_streams_beat_processes",
            "sharing_equal_work_streams",
        )
    },
)

"""One engine per resolution or one dynamic engine?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="resolutions",
    notebooks=("15_resolutions",),
    question="One engine per resolution or one dynamic engine?",
    sources=(("rules:RULES", "analyse:facts"),),
    headlines={
        "15_resolutions": (
            "resolutions_dynamic_cost_small",
            "resolutions_nearest_engine_pays",
            "resolutions_large_inputs_fill_gpu",
        )
    },
)

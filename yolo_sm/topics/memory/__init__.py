"""How much activation memory does a forward need?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="memory",
    notebooks=("07_memory_and_layout",),
    question="How much activation memory does a forward need?",
    sources=(("rules:RULES", "analyse:facts"),),
    pair_sources=(),
    headlines={
        "07_memory_and_layout": (
            "memory_peak_predicted",
            "memory_expandable_lowers_peak",
            "roofline_nchw_transforms",
        ),
    },
)

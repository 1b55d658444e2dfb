"""Is a layer bound by compute, memory or launches?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="roofline",
    notebooks=("06_roofline",),
    question="Is a layer bound by compute, memory or launches?",
    sources=(("rules:RULES", "analyse:facts"),),
    pair_sources=(),
    headlines={
        "06_roofline": (
            "roofline_yolo_compute_side",
            "roofline_yolo_under_roof",
            "roofline_zero_flop_below_copy",
            "roofline_wide_tensor_pipe_rises",
        ),
    },
)

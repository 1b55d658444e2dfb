"""Wide or deep, and which input sizes, use the SMs best?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="shapes",
    notebooks=("14_wide_or_deep", "15_resolutions"),
    question="Wide or deep, and which input sizes, use the SMs best?",
    sources=(("rules:RULES", "analyse:facts"),),
    pair_sources=(),
    headlines={
        "14_wide_or_deep": (
            "shapes_wide_faster_b64",
            "shapes_deep_more_kernels",
            "shapes_wide_higher_occupancy",
        ),
        "15_resolutions": (
            "shapes_dynamic_cost_small",
            "shapes_nearest_engine_pays",
            "shapes_large_inputs_fill_gpu",
        ),
    },
)

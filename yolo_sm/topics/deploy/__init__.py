"""What should I deploy on this GPU, and how far from the hardware is it?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="deploy",
    notebooks=("10_fast_engines",),
    question="What should I deploy on this GPU, and how far from the hardware is it?",
    sources=(("rules:RULES", "analyse:facts"),),
    pair_sources=(),
    headlines={
        "10_fast_engines": (
            "fast_b1_speedup",
            "fast_b64_speedup",
            "fast_pipeline_beats_predict",
        ),
    },
)

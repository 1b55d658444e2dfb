"""What do fp16, bf16 and 8-bit buy over fp32?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="precision",
    notebooks=("02_precision",),
    question="What do fp16, bf16 and 8-bit buy over fp32?",
    sources=(("rules:RULES", "analyse:facts"),),
    pair_sources=(),
    headlines={
        "02_precision": (
            "precision_fp16_faster_large_batch",
            "precision_fp16_hidden_by_launches",
            "precision_bf16_as_fast_as_fp16",
            "precision_fp32_on_simt",
            "precision_numerics_within_tolerance",
        ),
    },
)

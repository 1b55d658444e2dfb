"""What do fusion, autocast and a preallocated buffer buy?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="techniques",
    notebooks=("13_techniques",),
    question="What do fusion, autocast and a preallocated buffer buy?",
    sources=(("rules:RULES", "analyse:facts"),),
    headlines={
        "13_techniques": (
            "techniques_fusion_b16",
            "techniques_autocast_near_half",
            "techniques_buffer_gain",
        )
    },
)

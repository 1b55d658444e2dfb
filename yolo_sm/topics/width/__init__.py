"""How does a wider YOLO use the SMs?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="width",
    notebooks=("01_width_scaling",),
    question="How does a wider YOLO use the SMs?",
    headlines=(
        "width_wider_lower_occupancy",
        "width_wider_slower_than_flops",
        "width_wider_slower_per_image",
        "width_sm_coverage_grows",
    ),
)

"""What limits occupancy, and does low occupancy waste the GPU?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="primer",
    notebooks=("00_occupancy_primer",),
    question="What limits occupancy, and does low occupancy waste the GPU?",
    headlines=(
        "primer_tc_conv_below_60",
        "primer_flagship_two_limits",
        "primer_memory_kernels_high_occupancy",
        "primer_calculator_matches_ncu",
    ),
)

"""What limits occupancy, and does low occupancy waste the GPU?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="primer",
    notebooks=("00_occupancy_primer",),
    question="What limits occupancy, and does low occupancy waste the GPU?",
)

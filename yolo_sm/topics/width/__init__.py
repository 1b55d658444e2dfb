"""How does a wider YOLO use the SMs?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="width",
    notebooks=("01_width_scaling",),
    question="How does a wider YOLO use the SMs?",
)

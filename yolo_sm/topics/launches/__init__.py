"""Is the forward bound by the host?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="launches",
    notebooks=("08_launches",),
    question="Is the forward bound by the host?",
)

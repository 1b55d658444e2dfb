"""When are the SMs idle during a forward?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="timeline",
    notebooks=("05_sm_timeline",),
    question="When are the SMs idle during a forward?",
)

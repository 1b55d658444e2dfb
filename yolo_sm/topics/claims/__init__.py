"""Do four articles' claims about YOLO on GPUs hold?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="claims",
    notebooks=("claims",),
    question="Do four articles' claims about YOLO on GPUs hold?",
)

"""Do four articles' claims about YOLO on GPUs hold?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="claims",
    notebooks=("claims",),
    question="Do four articles' claims about YOLO on GPUs hold?",
    headlines=("claim_6", "claim_2", "claim_5", "claim_10", "claim_11", "claim_16"),
)

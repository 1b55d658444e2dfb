"""How does my model use the SMs?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="your_model",
    notebooks=("11_your_model",),
    question="How does my model use the SMs?",
)

"""Which layers keep the SMs busy, per width and batch?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="heatmaps",
    notebooks=("04_occupancy_heatmaps",),
    question="Which layers keep the SMs busy, per width and batch?",
)

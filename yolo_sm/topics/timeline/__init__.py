"""When are the SMs idle during a forward?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="timeline",
    notebooks=("05_sm_timeline",),
    question="When are the SMs idle during a forward?",
    headlines=(
        "timeline_b1_idles_unprofiled",
        "timeline_graph_removes_gaps",
        "timeline_sm_occupancy_rises_with_batch",
    ),
)

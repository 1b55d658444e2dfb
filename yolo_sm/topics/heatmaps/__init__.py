"""Which layers keep the SMs busy, per width and batch?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="heatmaps",
    notebooks=("04_occupancy_heatmaps",),
    question="Which layers keep the SMs busy, per width and batch?",
    headlines=(
        "heatmaps_resources_cap_tensor_cores",
        "heatmaps_slowest_layer_low",
        "heatmaps_small_batch_grid_limited",
        "heatmaps_fastest_not_highest_occupancy",
    ),
)

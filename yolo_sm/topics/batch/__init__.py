"""How does throughput grow with the batch?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="batch",
    notebooks=("03_batch_sweep",),
    question="How does throughput grow with the batch?",
    pair_sources=(("pair_rules.toml", "multi_gpu:facts"),),
    headlines=(
        "batch_pays",
        "batch_wide_saturates_by_b8",
        "batch_graph_wins_at_b1",
        "batch_memory_not_limiting",
    ),
)

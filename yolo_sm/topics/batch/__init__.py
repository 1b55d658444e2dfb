"""How does throughput grow with the batch?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="batch",
    notebooks=("03_batch_sweep",),
    question="How does throughput grow with the batch?",
    pair_sources=(("pair_rules.toml", "multi_gpu:facts"),),
)

"""Do two machines reach the same conclusions?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="compare",
    notebooks=("12_two_machines",),
    question="Do two machines reach the same conclusions?",
    sources=(),
    pair_sources=(("rules.toml", "analyse:facts"),),
)

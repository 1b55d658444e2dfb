"""What do live GPU counters say about the SMs?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="monitor",
    notebooks=("16_live_monitoring",),
    question="What do live GPU counters say about the SMs?",
    sources=(("rules:RULES", "analyse:facts"),),
    headlines={
        "16_live_monitoring": (
            "monitor_active_is_not_occupancy",
            "monitor_bench_fills_the_sms",
            "monitor_gpu_util_overstates",
        )
    },
)

"""What should I deploy on this GPU, and how far from the hardware is it?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="deploy",
    notebooks=("10_fast_engines",),
    question="What should I deploy on this GPU, and how far from the hardware is it?",
    sources=(("rules:RULES", "analyse:facts"),),
    pair_sources=(),
    headlines={
        "10_fast_engines": (
            "fast_b1_speedup",
            "fast_b64_speedup",
            "fast_pipeline_beats_predict",
        ),
    },
)

#: What ``yolo-sm bench`` runs without flags, and the defaults of every plan step of kind
#: ``bench`` (``yolo_sm.core.bench.BenchSpec``): the paths a user would deploy.
BENCH_DEFAULTS = {
    "models": "yolov8:0.5",
    "batches": (1, 16, 64),
    "engines": ("cudagraph/fp16/nhwc", "compile/fp16/nhwc", "compile:reduce-overhead/fp16/nhwc"),
    "pipeline_engine": "compile/fp16/nhwc",
    "pipeline_streams": (1, 3),
    "pipeline_modes": ("graph",),
    "pipeline_nms_topk": 1024,
    "seconds": 1.0,
}

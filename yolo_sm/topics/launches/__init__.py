"""Is the forward bound by the host?"""

from yolo_sm.topics import Topic

TOPIC = Topic(
    name="launches",
    notebooks=("08_launches",),
    question="Is the forward bound by the host?",
    headlines=(
        "roofline_narrow_eager_idles",
        "roofline_compile_below_c2f_bound",
        "hosts_eager_small_batch_host_bound",
        "hosts_eager_small_batch_cpu_time",
    ),
)

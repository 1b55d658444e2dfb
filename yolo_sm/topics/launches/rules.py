"""Notebook 08's rules: the GPU's idle share, what torch.compile fuses, the host's share."""

from yolo_sm.contract.vocab import HOST_BOUND_IDLE_SHARE
from yolo_sm.report.rules import Rule

GROUP = "08_launches"
IDLE_PCT = 100 * HOST_BOUND_IDLE_SHARE
SWEEP = ("sweep_fp16_nhwc",)

RULES: tuple[Rule, ...] = (
    Rule(id="roofline_narrow_eager_idles", group=GROUP, scope="width=0.25,batch=8",
         datasets=("sweep_fp16_nhwc", "trace_width_b8"),
         statement="Eager YOLOv8 width 0.25, fp16 NHWC, batch 8: the GPU runs no kernel for over "
         "a quarter of the forward (1 - GPU busy time over the median forward)",
         fact="roofline.eager_gpu_idle_share", op=">", threshold=0.25),
    Rule(id="roofline_compile_below_c2f_bound", group=GROUP,
         datasets=("trace_fp8_w1_b64", "trace_compile_w1_b64"),
         statement="YOLOv8 width 1.0, fp16 NHWC, batch 64: torch.compile (default mode) removes "
         "fewer of eager's kernel launches than fusing each C2f block into one kernel would "
         "(removed share minus the bound, both over the same eager forward)",
         fact="roofline.compile_minus_c2f_bound_launch_share", op="<", threshold=0.0),
    Rule(id="hosts_eager_small_batch_host_bound", group=GROUP, datasets=SWEEP,
         statement=f"Eager fp16 NHWC at batch 1: host-bound at every width (the GPU idle for more "
         f"than {IDLE_PCT:g} % of the forward; share of widths)",
         fact="hosts.eager_b1_host_bound_share_pct", op=">=", threshold=100.0, partly=50.0,
         unit="%"),
    Rule(id="hosts_eager_small_batch_cpu_time", group=GROUP, datasets=SWEEP,
         statement="Eager fp16 NHWC at batch 1: the launching thread spends at least 0.9 ms of "
         "CPU time per ms of forward (means over the same timed calls, median over widths): the "
         "host's CPU sets the pace",
         fact="hosts.eager_b1_cpu_over_forward", op=">=", threshold=0.9, partly=0.75, unit="x"),
    Rule(id="hosts_graph_keeps_gpu_busy", group=GROUP, datasets=SWEEP,
         statement=f"CUDA graph, fp16 NHWC: at no width or batch of the sweep does the GPU idle "
         f"for more than {IDLE_PCT:g} % of the forward (the most of any point)",
         fact="hosts.graph_max_gpu_idle_pct", op="<=", threshold=IDLE_PCT, partly=2 * IDLE_PCT,
         unit="%"),
)  # fmt: skip

"""Notebook 07's rules: the layout cost, the lifetimes against the measured peak, expandable
segments."""

from yolo_sm.report.rules import Rule

GROUP = "07_memory_and_layout"
#: the largest error of the lifetimes' prediction on the measured activation peak (%)
PEAK_ERROR_PCT = 15.0
POOL_RUN = ("eager YOLOv8 width 1.0 fp16 NHWC, 200 forwards at random batch sizes 1-64, each "
            "allocator in its own process")  # fmt: skip

RULES: tuple[Rule, ...] = (
    Rule(id="roofline_nchw_transforms", group=GROUP, datasets=("ncu_precision_w1",),
         scope="precision=fp16",
         statement="YOLOv8 width 1.0, fp16, batch 8 (one eager forward under Nsight Compute): "
         "NCHW spends at least 5 % of its kernel time in layout transforms (share)",
         fact="roofline.nchw_transform_time_share", op=">=", threshold=0.05, partly=0.01),
    Rule(id="memory_peak_predicted", group=GROUP, datasets=("memory_lifetimes",),
         statement="Eager fp16 NHWC forwards at batch 16, 640x640: the recorded lifetimes (each "
         "activation live until eager PyTorch released it) predict the memory the forward adds "
         "to what the process held before it (torch.cuda.max_memory_allocated minus "
         f"memory_allocated before) within {PEAK_ERROR_PCT:g} % for every model (largest error)",
         fact="memory.activation_peak_error_pct_max", op="<=", threshold=PEAK_ERROR_PCT,
         partly=2 * PEAK_ERROR_PCT, unit="%"),
    Rule(id="memory_expandable_lowers_peak", group=GROUP, datasets=("memory_pool",),
         statement=f"{POOL_RUN}: expandable segments lower the peak reserved memory (ratio to "
         "the default allocator)",
         fact="memory.expandable_peak_reserved_ratio", op="<", threshold=1.0, partly=1.05,
         unit="x"),
    Rule(id="memory_expandable_same_speed", group=GROUP, datasets=("memory_pool",),
         statement=f"{POOL_RUN}: expandable segments keep the run's throughput within 5 % of the "
         "default allocator's (img/s ratio, first forward at each batch size left out)",
         fact="memory.expandable_img_per_s_ratio", op=">=", threshold=0.95, unit="x"),
)  # fmt: skip

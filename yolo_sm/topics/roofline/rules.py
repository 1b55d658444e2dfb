"""Notebook 06's rules: where YOLOv8's layers sit under the roofline measured on the same machine
(fp16 NHWC, batch 8, width 1.0, one eager forward under Nsight Compute), and the wide conv stack.
Claims 6 and 14 (notebook 09) are decided there and only linked from 06."""

from yolo_sm.report.rules import Rule

GROUP = "06_roofline"
ROOF = ("ncu_width_b8", "model_layers", "ceilings")
AT = "YOLOv8 width 1.0, fp16 NHWC, batch 8 (Nsight Compute kernel time, burst ceilings)"

RULES: tuple[Rule, ...] = (
    Rule(id="roofline_yolo_under_roof", group=GROUP, datasets=ROOF, scope="width=1.0",
         statement=f"{AT}: the layers with FLOPs reach under half of the roof at their intensity "
         "(FLOPs per byte of weights + inputs + output; time-weighted share of the roof)",
         fact="roofline.yolo_pct_of_roof_tw", op="<", threshold=50.0, unit="%"),
    Rule(id="roofline_yolo_compute_side", group=GROUP, datasets=ROOF, scope="width=1.0",
         statement=f"{AT}: most kernel time is in layers on the compute side of the ridge point "
         "(share of kernel time; intensity of weights + inputs + output)",
         fact="roofline.yolo_compute_side_time_share", op=">=", threshold=0.5),
    Rule(id="roofline_zero_flop_below_copy", group=GROUP, datasets=ROOF, scope="width=1.0",
         statement=f"{AT}: the layers without FLOPs (Concat, Upsample) move their bytes at under "
         "half the device-to-device copy ceiling (the fastest of them)",
         fact="roofline.zero_flop_max_pct_of_copy", op="<", threshold=50.0, unit="%"),
    Rule(id="roofline_upsample_slow", group=GROUP, datasets=ROOF, scope="width=1.0",
         statement=f"{AT}: the nearest-upsample layers move their bytes at under half the rate "
         "of the concatenations (median GB/s of each type's layers)",
         fact="roofline.upsample_over_concat_gbps", op="<", threshold=0.5, unit="x"),
    Rule(id="roofline_wide_tensor_pipe_rises", group=GROUP, datasets=("ncu_wide_stack",),
         statement="The wide conv stack (fp16 NHWC, batch 8): tensor-pipe use rises from its "
         "first stage to its last (points of % of peak, time-weighted, mean over width factors)",
         fact="roofline.wide_tensor_pipe_rise_pct", op=">", threshold=0.0, unit="%"),
)  # fmt: skip

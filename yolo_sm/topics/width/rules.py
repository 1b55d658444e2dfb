"""The width notebook's rules (01), over :func:`yolo_sm.topics.width.analyse.facts`."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.width.analyse import BENCH, CEILINGS, NCU_WIDE, NCU_WIDTH, PRESETS, SWEEP

G = "01_width_scaling"
SWEPT = "YOLOv8 fp16 NHWC, CUDA graph, batch 8; widest over narrowest width"
NCU8 = "Nsight Compute, YOLOv8 fp16 NHWC, batch 8; widest minus narrowest width"

RULES: tuple[Rule, ...] = check_unique((
    Rule(id="width_wider_slower_per_image", group=G,
         statement=f"A wider model runs fewer images per second ({SWEPT})",
         fact="img_per_s_widest_over_narrowest", op="<", threshold=1.0, unit="x",
         datasets=(SWEEP,)),
    Rule(id="width_wider_slower_than_flops", group=G,
         statement=f"A wider model runs slower than its FLOPs predict: delivered TFLOP/s fall "
         f"with width ({SWEPT})",
         fact="tflops_widest_over_narrowest", op="<", threshold=1.0, unit="x", datasets=(SWEEP,)),
    Rule(id="width_best_point_half_ceiling", group=G,
         statement="The best point of the fp16 NHWC width sweep (any width, batch, backend) "
         "delivers at least half the root's measured fp16 matmul ceiling",
         fact="best_share_of_fp16_ceiling", op=">=", threshold=50.0, partly=25.0, unit="%",
         datasets=(SWEEP, CEILINGS)),
    Rule(id="width_batch1_eager_flat", group=G,
         statement="Eager at batch 1 (YOLOv8 fp16 NHWC) runs about the same img/s whatever the "
         "width (fastest over slowest width)",
         fact="batch1_eager_spread", op="<=", threshold=1.5, partly=2.0, unit="x",
         datasets=(SWEEP,)),
    Rule(id="width_wider_lower_occupancy", group=G,
         statement=f"A wider model runs at lower achieved occupancy (the forward's, "
         f"time-weighted; {NCU8})",
         fact="width_achieved_occupancy_change", op="<=", threshold=-5.0, unit="pp",
         datasets=(NCU_WIDTH,)),
    Rule(id="width_tc_conv_occupancy_fixed", group=G,
         statement="Tensor-core convolutions keep their theoretical occupancy at every width "
         "(time-weighted, range over the widths; Nsight Compute, fp16 NHWC, batch 8)",
         fact="tensor_core_conv_theoretical_range", op="<=", threshold=5.0, partly=10.0,
         unit="pp", datasets=(NCU_WIDTH,)),
    Rule(id="width_tc_conv_share_grows", group=G,
         statement=f"Tensor-core convolutions take a larger share of the kernel time as width "
         f"grows ({NCU8})",
         fact="tensor_core_conv_share_change", op=">=", threshold=5.0, partly=1.0, unit="pp",
         datasets=(NCU_WIDTH,)),
    Rule(id="width_sm_coverage_grows", group=G,
         statement=f"Wider layers fill more of the SMs' block slots (SM coverage, "
         f"time-weighted; {NCU8})",
         fact="width_sm_coverage_change", op=">=", threshold=5.0, partly=1.0, unit="pp",
         datasets=(NCU_WIDTH,)),
    Rule(id="width_block_does_not_widen", group=G,
         statement="The wide conv stack's dominant tensor-core convolution keeps one block size "
         "at every width factor",
         fact="wide_main_block_sizes", op="<=", threshold=1.0, unit="block sizes",
         datasets=(NCU_WIDE,)),
    Rule(id="width_tensor_pipe_busier", group=G,
         statement="Its tensor pipe gets busier as the stack widens (time-weighted, widest minus "
         "narrowest)",
         fact="wide_main_tensor_pipe_change", op=">=", threshold=5.0, partly=1.0, unit="pp",
         datasets=(NCU_WIDE,)),
    Rule(id="width_presets_cost_order", group=G,
         statement="Where the host set the pace of neither point, a yolov8 / yolo11 preset with "
         "more FLOPs per image never runs more img/s than the next cheaper one (same precision, "
         "backend, batch)",
         fact="presets_inversions_not_host_bound", op="<=", threshold=0.0, unit="points",
         datasets=(PRESETS,)),
    *(Rule(id=f"width_presets_{fam}_bigger_uses_gpu_better", group=G, scope=f"family={fam}",
           statement=f"{fam}'s costliest preset delivers more TFLOP/s than its cheapest (fp16, "
           "CUDA graph, largest batch; presets with figures)",
           fact="presets_tflops_costliest_over_cheapest", op=">", threshold=1.0, unit="x",
           datasets=(PRESETS,))
      for fam in ("yolov8", "yolo11")),
    Rule(id="width_compile_gain_falls", group=G,
         statement="torch.compile's gain over eager (fp16 NHWC) falls with width at the largest "
         "batch (widest over narrowest)",
         fact="compile_gain_widest_over_narrowest", op="<", threshold=1.0, unit="x",
         datasets=(BENCH,)),
    Rule(id="width_compile_gain_not_launches", group=G,
         statement="At the largest batch compile's gain is not launch cost: a CUDA graph alone "
         "gives less at every width (largest graph-over-compile ratio)",
         fact="graph_over_compile_max_large_batch", op="<", threshold=1.0, unit="x",
         datasets=(BENCH,)),
    Rule(id="width_small_batch_launches_pay", group=G,
         statement="At the smallest batch removing launches pays more than fusing kernels "
         "(median CUDA graph gain over median compile gain across widths)",
         fact="graph_over_compile_small_batch", op=">", threshold=1.0, unit="x",
         datasets=(BENCH,)),
    Rule(id="width_baselines_agree", group=G,
         statement="Where the GPU set the pace in both runs, the bench's eager fp16 NHWC img/s "
         "agree with the width sweep's (another run; largest gap over widths and batches)",
         fact="bench_vs_sweep_eager_max_dev", op="<=", threshold=10.0, partly=25.0, unit="%",
         datasets=(BENCH, SWEEP)),
))  # fmt: skip

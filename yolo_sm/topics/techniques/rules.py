"""The rules of notebook 13 (what fusion, autocast and a preallocated buffer buy), as data."""

from yolo_sm.report.rules import Rule, validate
from yolo_sm.topics.techniques.analyse import DATASET, FACT_KEYS

_G, _D = "13_techniques", (DATASET,)

RULES: tuple[Rule, ...] = validate((
    Rule(id="techniques_fusion_b16", group=_G, datasets=_D, scope="backend=eager,batch=16",
         statement="Fusing conv + BN + ReLU (BN folded, bias, residual add and ReLU in the "
         "convolution's cuDNN call) speeds ResNet-101 at least 1.2x at batch 16 (eager)",
         fact="techniques.fusion_speedup", op=">=", threshold=1.2, partly=1.05, unit="x"),
    Rule(id="techniques_fusion_b16_graph", group=_G, datasets=_D,
         scope="backend=cudagraph,batch=16",
         statement="Fusing conv + BN + ReLU speeds ResNet-101 at least 1.2x at batch 16 "
         "inside one CUDA graph",
         fact="techniques.fusion_speedup", op=">=", threshold=1.2, partly=1.05, unit="x"),
    Rule(id="techniques_fusion_b64", group=_G, datasets=_D, scope="backend=eager,batch=64",
         statement="Fusing conv + BN + ReLU speeds ResNet-101 at least 1.2x at batch 64 (eager)",
         fact="techniques.fusion_speedup", op=">=", threshold=1.2, partly=1.05, unit="x"),
    Rule(id="techniques_bn_fold_alone_small", group=_G, datasets=_D,
         scope="backend=eager,batch=16",
         statement="Folding BN into the convolutions alone (no bias, add or ReLU fused) "
         "gains under 1.1x on ResNet-101 at batch 16 (eager)",
         fact="techniques.bn_fold_speedup", op="<", threshold=1.1, unit="x"),
    Rule(id="techniques_fusion_elementwise_drop", group=_G, datasets=_D,
         scope="backend=eager,batch=16",
         statement="Fusion cuts the elementwise share of ResNet-101's kernel time by at "
         "least 30 percentage points at batch 16 (eager)",
         fact="techniques.fusion_elementwise_drop_pct", op=">=", threshold=30.0, partly=10.0,
         unit="pp"),
    Rule(id="techniques_autocast_near_half", group=_G, datasets=_D,
         scope="backend=eager,batch=16",
         statement="At batch 16 (eager), autocast on the fp32 YOLOv8 model runs within 10 % "
         "of the model cast to half (img/s ratio, median over the widths measured)",
         fact="techniques.autocast_over_half_median", op=">=", threshold=0.9, partly=0.75,
         unit="x"),
    Rule(id="techniques_autocast_near_half_graph", group=_G, datasets=_D,
         scope="backend=cudagraph,batch=16",
         statement="At batch 16 inside one CUDA graph, autocast runs within 10 % of the half "
         "model (median over the widths measured)",
         fact="techniques.autocast_over_half_median", op=">=", threshold=0.9, partly=0.75,
         unit="x"),
    Rule(id="techniques_buffer_gain", group=_G, datasets=_D, scope="backend=eager,batch=16",
         statement="At batch 16 (eager, YOLOv8 width 0.5), stacking the frames into a "
         "preallocated buffer (torch.stack with out=) gains at least 15 % over a new "
         "torch.stack per step, assembly + forward",
         fact="techniques.buffer_step_gain_pct", op=">=", threshold=15.0, partly=5.0, unit="%"),
    Rule(id="techniques_buffer_gain_graph", group=_G, datasets=_D,
         scope="backend=cudagraph,batch=16",
         statement="At batch 16 with one CUDA graph, stacking the frames into the graph's "
         "input gains at least 15 % over stacking them anew and copying them in",
         fact="techniques.buffer_step_gain_pct", op=">=", threshold=15.0, partly=5.0, unit="%"),
    Rule(id="techniques_buffer_assembly_gain", group=_G, datasets=_D,
         scope="backend=none,batch=16",
         statement="At batch 16, stacking into a preallocated buffer is at least 15 % faster "
         "than a new torch.stack, the assembly alone",
         fact="techniques.buffer_assembly_gain_pct", op=">=", threshold=15.0, partly=5.0,
         unit="%"),
), FACT_KEYS, _D)  # fmt: skip

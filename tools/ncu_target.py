"""Target program for Nsight Compute ground truth: eager forwards of several configs, each inside
NVTX ranges ``profiled_forward/<label>`` (warm-up and cuDNN autotuning stay outside them).

    ncu --nvtx --nvtx-include 'profiled_forward/' ... python3 tools/ncu_target.py
"""

import sys

import torch

from yolo_sm.collect.engines import EngineConfig, build_engine
from yolo_sm.collect.models import build_yolo, wide_conv_stack

CONFIGS = [  # (label, model factory, precision, layout, batch)
    ("yolov8_w0.25_fp16_nhwc_b8", lambda: build_yolo("yolov8", 0.25), "fp16", "nhwc", 8),
    ("yolov8_w1.0_fp16_nhwc_b8", lambda: build_yolo("yolov8", 1.0), "fp16", "nhwc", 8),
    ("yolov8_w2.0_fp16_nhwc_b8", lambda: build_yolo("yolov8", 2.0), "fp16", "nhwc", 8),
    ("yolov8_w1.0_fp32_nchw_b8", lambda: build_yolo("yolov8", 1.0), "fp32", "nchw", 8),
    ("yolov8_w1.0_bf16_nchw_b1", lambda: build_yolo("yolov8", 1.0), "bf16", "nchw", 1),
    ("yolo11_w0.5_tf32_nhwc_b8", lambda: build_yolo("yolo11", 0.5), "tf32", "nhwc", 8),
] + [
    (f"wide_{w}_fp16_nhwc_b8", (lambda w=w: wide_conv_stack(w)), "fp16", "nhwc", 8)
    for w in (1.0, 1.25, 1.5, 1.75, 2.0)
]

only = sys.argv[1:]
for label, factory, precision, layout, batch in CONFIGS:
    if only and not any(label.startswith(o) for o in only):
        continue
    model = factory()
    eng = build_engine(model, EngineConfig(precision=precision, layout=layout, batch=batch))
    x = eng.make_input(0)
    for _ in range(2):
        eng(x)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("profiled_forward")
    torch.cuda.nvtx.range_push(label)
    eng(x)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()
    print(f"done {label}", flush=True)
    del eng, model

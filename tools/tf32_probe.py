"""Does TF32 take effect for cuDNN convolutions here? One large 3x3 conv, fp32 vs tf32."""

import torch

from yolo_sm.collect.engines import EngineConfig
from yolo_sm.collect.engines.base import numerics, relative_l2
from yolo_sm.collect.timing import measure

conv = torch.nn.Conv2d(256, 256, 3, padding=1).cuda().eval()
x = torch.rand(32, 256, 80, 80, device="cuda")
with torch.no_grad():
    ref = torch.nn.functional.conv2d(
        x.double(), conv.weight.double(), conv.bias.double(), padding=1
    )
    for prec in ("fp32", "tf32"):
        cfg = EngineConfig(precision=prec, layout="nchw", batch=32, device="cuda")
        with numerics(cfg):
            out = conv(x)
            m = measure(lambda: conv(x), device="cuda", budget_ms=200, with_provenance=False)
            state = (
                torch.backends.cudnn.allow_tf32,
                getattr(torch.backends.cudnn, "conv", None)
                and torch.backends.cudnn.conv.fp32_precision,
            )
        print(
            f"tf32probe {prec}: rel_err {relative_l2(out, ref):.3g}, "
            f"{m.median_ms:.3f} ms, flags {state}"
        )

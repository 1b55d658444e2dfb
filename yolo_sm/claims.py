"""The reference articles' quantitative claims, each checked against the shipped H200 data.

One function per claim returns a :class:`Verdict`; a claim whose data is not shipped yet says
which dataset (plan step) it waits for, and claims that cannot be measured here say why.
``check_all()`` is the table notebook 07 shows; it updates itself when datasets arrive.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from yolo_sm.errors import UserError

HOLDS, FAILS, PARTLY = "holds", "does not hold", "partly holds"
NOT_TESTABLE, PENDING = "not testable here", "pending data"


@dataclass(frozen=True)
class Verdict:
    claim: int
    text: str
    verdict: str
    number: str  # the measured figure behind the verdict
    evidence: str  # dataset / computation it comes from
    provisional: bool = False  # from data measured before BN calibration (see data/README.md)


def _load(name: str):
    from yolo_sm import data

    try:
        return data.load(name)
    except UserError:
        return None


def _pending(n, text, name):
    """``name`` is a step of data/plans/h200.yaml, or a phrase saying what else is missing."""
    need = f"needs {name}" if " " in name else f"needs dataset h200/{name} (data/plans/h200.yaml)"
    return Verdict(n, text, PENDING, "", need)


def claim_1():
    text = "Width x1.25 raises FLOPs about 56 %."
    from yolo_sm.models import build_yolo, model_flops

    f1, f125 = (model_flops(build_yolo("yolov8", w, calibrate=False)) for w in (1.0, 1.25))
    rise = f125 / f1 - 1
    return Verdict(
        1,
        text,
        HOLDS if abs(rise - 0.56) < 0.02 else FAILS,
        f"+{rise:.1%}",
        "channel table of YOLOv8 (depth 0.33) at 640 px, 2 FLOPs per multiply-add",
    )


def claim_3():
    text = (
        "Width <= 1.25 keeps occupancy > 85 %; 1.5 gives ~60 %; above 1.7 most layers fall "
        "below 50 %."
    )
    ncu = _load("h200/ncu_width_b8")
    provisional = ncu is None
    if ncu is None:
        ncu = _load("h200/ncu_occupancy")
        if ncu is None:
            return _pending(3, text, "ncu_width_b8")
        ncu = ncu[ncu.nvtx_range.str.match(r"yolov8_w[\d.]+_fp16_nhwc_b8")]
    from yolo_sm.analysis import time_weighted

    tw = time_weighted(ncu, "nvtx_range").set_index("nvtx_range").achieved_occupancy_tw_pct
    parts = ", ".join(f"{k.split('_')[1]} {v:.0f} %" for k, v in tw.items())
    small = [v for k, v in tw.items() if float(k.split("_")[1][1:]) <= 1.25]
    verdict = FAILS if small and min(small) < 85 else HOLDS
    return Verdict(
        3,
        text,
        verdict,
        f"time-weighted achieved occupancy by width: {parts}",
        "Nsight Compute, YOLOv8 fp16 NHWC batch 8",
        provisional,
    )


# dense fp16 tensor-core peak measured on the H200 machine kind (../shared/h200/README.md,
# an 8192^3 bf16/fp16 matmul on random data); the datasheet says ~990
PEAK_FP16_TFLOPS = 790.0


def claim_6():
    text = "An inference service under 60 % SM occupancy is wasting the GPU."
    ncu = _load("h200/ncu_occupancy")
    if ncu is None:
        return _pending(6, text, "ncu_occupancy")
    from yolo_sm.kernels import add_kernel_class
    from yolo_sm.models import channel_table, wide_conv_stack

    k = add_kernel_class(ncu[ncu.nvtx_range == "wide_2.0_fp16_nhwc_b8"])
    conv = k[k.kernel_class == "tensor_core_conv"]
    flops = channel_table(wide_conv_stack(2.0), 640).flops.sum() * 8  # batch 8
    tflops = flops / (conv.duration_us.sum() * 1e-6) / 1e12
    number = (
        f"wide conv stack x2.0, fp16 batch 8: its tensor-core convolutions run at "
        f"{conv.theoretical_occupancy_pct.min():.2f}-{conv.theoretical_occupancy_pct.max():.0f} % "
        f"theoretical ({conv.achieved_occupancy_pct.mean():.1f} % achieved) occupancy and "
        f"deliver {tflops:.0f} TFLOP/s, {tflops / PEAK_FP16_TFLOPS:.0%} of the "
        f"{PEAK_FP16_TFLOPS:.0f} TFLOP/s fp16 peak measured on this machine kind"
    )
    return Verdict(
        6,
        text,
        FAILS if tflops > 0.5 * PEAK_FP16_TFLOPS else PARTLY,
        number,
        "Nsight Compute kernel times + channel-table FLOPs; Hopper's cuDNN kernels keep "
        "one 384-thread block per SM and their tiles in registers",
        True,
    )


def claim_9():
    return Verdict(
        9,
        "FP16 costs under 0.3 % mAP.",
        NOT_TESTABLE,
        "",
        "mAP needs trained weights and a labelled set (COCO); this project runs random "
        "weights offline. The numerical error of fp16 (relative L2 of the head output) is "
        "in notebook 02",
    )


def claim_16():
    text = "NHWC can beat NCHW."
    sweep = _load("h200/foundation_sweep")
    if sweep is None:
        return _pending(16, text, "foundation_sweep")
    e = sweep[(sweep.backend == "eager") & (sweep.precision == "fp16") & (sweep.status == "ok")]
    p = e.pivot_table(index=["width", "batch"], columns="layout", values="median_ms")
    ratio = (p.nchw / p.nhwc).loc[(1.0, 64)]
    wins = int((p.nhwc < p.nchw).sum())
    return Verdict(
        16,
        text,
        HOLDS if wins else FAILS,
        f"NHWC faster in {wins} of {len(p)} fp16 eager points; width 1.0 batch 64: "
        f"{p.loc[(1.0, 64), 'nchw']:.1f} -> {p.loc[(1.0, 64), 'nhwc']:.1f} ms "
        f"({ratio:.2f}x)",
        "h200/foundation_sweep (same run)",
        True,
    )


PENDING_CLAIMS = {
    2: (
        "Width x1.5 at batch 8: FPS 210 -> 147 while SM occupancy falls 92 % -> 48 %.",
        "sweep_fp16_nhwc",
    ),
    4: (
        "FP16 restores occupancy (48 -> 76 %) and FPS (147 -> 189) of the wide model.",
        "ncu_precision_w1",
    ),
    5: (
        "Batch 1/2/4/8/16 gives occupancy 40/62/78/48/39 % and FPS 68/115/172/147/138: batch 4 "
        "is best.",
        "ncu_batch_w1",
    ),
    7: ("YOLOv8s batch 1 -> 32 raises FPS 147 -> 392 (A100).", "sweep_fp16_nhwc"),
    8: (
        "Safe batch = floor(0.7 x GPU memory / per-image memory); one 640x640 image needs ~1.2 GB.",
        "sweep_fp16_nhwc",
    ),
    10: ("INT8 is about 40 % faster than FP16.", "the 8-bit path of the fast-engines issue"),
    11: ("Fusing YOLOv8's C2f removes over 90 % of kernel launches.", "trace_width_b8"),
    12: (
        "Copying one 640x640x3 fp16 frame host-to-device takes ~0.08 ms over PCIe 4.0 x16.",
        "a yolo-sm bench run with the pipeline (fast-engines issue)",
    ),
    13: (
        "Multi-stream pipelining cuts end-to-end latency jitter by 60 % or more.",
        "a yolo-sm bench run with the pipeline (fast-engines issue)",
    ),
    14: (
        "Early ResNet-101 layers are bandwidth-bound, deep layers compute-bound.",
        "ncu_resnet101",
    ),
    15: ("Small PAN-FPN convolutions drop SM utilisation below 20 %.", "ncu_width_b8"),
}


def check_all():
    """One row per claim (1-16): verdict, the number behind it, its evidence."""
    import pandas as pd

    rows = [f() for f in (claim_1, claim_3, claim_6, claim_9, claim_16)]
    rows += [_pending(n, text, name) for n, (text, name) in PENDING_CLAIMS.items()]
    return pd.DataFrame([asdict(v) for v in sorted(rows, key=lambda v: v.claim)])

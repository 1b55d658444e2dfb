"""The reference articles' quantitative claims as rules (notebook 09).

Each claim is one :class:`~yolo_sm.report.rules.Rule`, the only one that decides it. It reads
a topic's fact where a topic computes the number (the heatmaps', the batch notebook's, the
roofline's) and otherwise a fact of :func:`yolo_sm.topics.claims.analyse.facts` (keys ``claims.*``);
:func:`verdicts` decides them all for one dataset root.
The measured machine will not reproduce an A100's or a T4's absolute numbers, so a rule tests
the mechanism a claim asserts ("a wider model loses occupancy") where the article's figure is
tied to its GPU. A claim nothing in the root can measure has no fact and reads "not tested".
"""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import concat
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config
from yolo_sm.report import plots
from yolo_sm.report.colors import TEMPLATE, color_map
from yolo_sm.report.rules import Rule, check_unique, evaluate, rule_maker
from yolo_sm.report.sections import Note, needs
from yolo_sm.report.style import finish
from yolo_sm.report.text import code
from yolo_sm.topics.claims import analyse as analyse_claims
from yolo_sm.topics.heatmaps import analyse as analyse_heatmaps
from yolo_sm.topics.roofline.analyse import DEEP, EARLY
from yolo_sm.topics.roofline.analyse import PREFIX as ROOFLINE

_claim = rule_maker("claim", "claims")


#: One rule per claim of the four articles, in the articles' order (claim 3 has three parts,
#: one rule each).
CLAIMS_RULES: tuple[Rule, ...] = check_unique(
    (
        _claim(
            1,
            "Width x1.25 raises FLOPs about 56 % (measured rise within 2 points of 56 %)",
            fact="claims.flops_rise_w1.25_off_claim_pp",
            op="<=",
            threshold=2.0,
            unit="pp",
            datasets=("sweep_fp16_nhwc",),
        ),
        _claim(
            2,
            "Width x1.5 at batch 8 costs SM occupancy (the article: 92 % -> 48 %): time-weighted "
            "achieved occupancy falls at least 20 points from width 1.0 to 1.5",
            fact="claims.occupancy_drop_w1_to_w1.5_pp",
            op=">=",
            threshold=20.0,
            unit="pp",
            datasets=("ncu_width_b8",),
        ),
        _claim(
            3,
            "Width <= 1.25 keeps occupancy above 85 % (time-weighted achieved occupancy, batch 8,"
            " lowest of those widths)",
            fact="achieved_occupancy_tw_pct_min",
            scope="width<=1.25",
            op=">",
            threshold=85.0,
            unit="%",
            datasets=(analyse_heatmaps.WIDTH_NCU,),
        ),
        _claim(
            "3_w1.5",
            "Width 1.5 gives about 60 % occupancy (the same claim, second part: time-weighted "
            "achieved occupancy at batch 8 within 5 points of 60 %)",
            fact="achieved_occupancy_tw_pct_distance_from_60",
            scope="width=1.5",
            op="<=",
            threshold=5.0,
            unit="points",
            datasets=(analyse_heatmaps.WIDTH_NCU,),
        ),
        _claim(
            "3_w1.7",
            f"Above width 1.7 most layers fall below {analyse_heatmaps.LOW_PCT:g} % occupancy "
            "(the same claim, third part: share of layers under that achieved occupancy at batch"
            " 8, lowest of those widths)",
            fact=f"layers_below_{analyse_heatmaps.LOW_PCT:g}_share_min",
            scope="width>1.7",
            op=">",
            threshold=50.0,
            unit="%",
            datasets=(analyse_heatmaps.WIDTH_NCU,),
        ),
        _claim(
            4,
            "FP16 restores occupancy of the wide model by fitting more blocks per SM: fp16 NHWC "
            "convolutions keep more resident blocks per SM than fp32 NCHW ones",
            fact="claims.conv_blocks_per_sm_fp16_nhwc_over_fp32_nchw",
            op=">",
            threshold=1.0,
            unit="x",
            datasets=("ncu_precision_w1",),
        ),
        _claim(
            5,
            "Batch 4 is the best of batch 1/2/4/8/16 (img/s at batch 4 over the best of them)",
            fact="claims.img_per_s_b4_over_best_b1_16",
            op=">=",
            threshold=1.0,
            unit="x",
            datasets=("sweep_fp16_nhwc",),
        ),
        _claim(
            6,
            "Kernels under 60 % occupancy waste the GPU: at width 1.0 the time-weighted tensor-"
            "pipe use of YOLOv8's kernels under 60 % theoretical occupancy stays under 30 % of "
            "peak",
            fact=ROOFLINE + "tensor_pipe_pct_below_60_occupancy",
            scope="width=1.0",
            op="<",
            threshold=30.0,
            unit="%",
            partly=50.0,
            datasets=("ncu_throughput_w1",),
        ),
        _claim(
            7,
            "YOLOv8s batch 1 -> 32 raises FPS 2.7x (147 -> 392 on an A100): eager img/s at width "
            "0.5 at least doubles",
            fact="claims.img_per_s_b32_over_b1_w0.5",
            op=">=",
            threshold=2.0,
            unit="x",
            partly=1.2,
            datasets=("sweep_fp16_nhwc",),
        ),
        _claim(
            8,
            "One 640x640 image needs ~1.2 GB, the basis of safe batch = floor(0.7 x memory / per-"
            "image memory): measured peak memory per image within 2x of 1.2 GB",
            fact="claims.image_memory_off_claim",
            op="<=",
            threshold=2.0,
            unit="x",
            datasets=("sweep_fp16_nhwc",),
        ),
        _claim(
            9,
            "FP16 costs under 0.3 % mAP (needs trained weights and a labelled set)",
            fact="claims.fp16_map_drop_pct",
            op="<",
            threshold=0.3,
            unit="%",
        ),
        _claim(
            10,
            "INT8 inference is about 40 % faster than FP16: the INT8 engine's CUDA graph runs at "
            "least 1.3x the img/s of the FP16 CUDA graph of the same bench, batch 64, at every "
            "width >= 1.0 (smallest ratio)",
            fact="claims.int8_over_fp16_cudagraph_b64_min",
            op=">=",
            threshold=1.3,
            unit="x",
            partly=1.0,
            datasets=(analyse_claims.BENCH_8BIT,),
        ),
        _claim(
            "10_fp8",
            "The same for FP8 (E4M3), the other 8-bit format: the FP8 engine's CUDA graph runs at "
            "least 1.3x the img/s of the FP16 CUDA graph, batch 64, at every width >= 1.0 where it"
            " ran (smallest ratio)",
            fact="claims.fp8_over_fp16_cudagraph_b64_min",
            op=">=",
            threshold=1.3,
            unit="x",
            partly=1.0,
            datasets=(analyse_claims.BENCH_8BIT,),
        ),
        _claim(
            11,
            "Fusing YOLOv8's C2f blocks removes over 90 % of kernel launches (share of a forward's"
            " launches that one kernel per C2f block would remove, the most over widths)",
            fact=ROOFLINE + "c2f_fusion_removed_launch_share",
            op=">",
            threshold=0.9,
            unit="",
            datasets=("trace_width_b8",),
        ),
        _claim(
            12,
            "Copying one 640x640x3 fp16 frame host-to-device takes ~0.08 ms (within 2x)",
            fact="claims.frame_copy_off_claim",
            op="<=",
            threshold=2.0,
            unit="x",
            datasets=("ceilings",),
        ),
        _claim(
            13,
            "Multi-stream pipelining cuts end-to-end latency jitter by 60 % or more (frames "
            "arriving below the pipeline's capacity)",
            fact="claims.jitter_cut_below_capacity_pct",
            op=">=",
            threshold=60.0,
            unit="%",
            partly=0.0,
            datasets=("bench_fast_engines",),
        ),
        _claim(
            14,
            "Early ResNet-101 layers are bandwidth-bound, deep layers compute-bound: the DRAM "
            f"throughput of each early stage ({', '.join(EARLY)}) and the SM throughput of each "
            f"deep stage ({', '.join(DEEP)}) at 60 % of peak or more (the weakest of them)",
            fact="claims.resnet_weaker_bound_pct",
            op=">=",
            threshold=60.0,
            unit="%",
            partly=40.0,
            datasets=("ncu_resnet101", "model_layers"),
        ),
        _claim(
            15,
            "Small PAN-FPN convolutions drop SM utilisation below 20 % (lowest SM throughput of a"
            " neck conv layer)",
            fact="claims.neck_conv_sm_throughput_min_pct",
            op="<",
            threshold=20.0,
            unit="%",
            datasets=("ncu_throughput_w1",),
        ),
        _claim(
            16,
            "NHWC can beat NCHW (fp16 GPU time per forward at width 1.0, NCHW over NHWC)",
            fact=ROOFLINE + "nchw_time_vs_nhwc",
            scope="precision=fp16",
            op=">",
            threshold=1.0,
            unit="x",
            datasets=("ncu_precision_w1",),
        ),
    )
)


def facts(root: DataRoot) -> pd.DataFrame:
    """Every fact the claims' rules read from ``root``: the topics' facts the claims share
    (:func:`yolo_sm.topics.claims.analyse.topic_facts`) and the claims' own."""
    topic = analyse_claims.topic_facts(root)
    return concat(topic, analyse_claims.facts(root, topic))


def verdicts(root: DataRoot) -> pd.DataFrame:
    """The claims' verdict table for ``root`` (:func:`yolo_sm.report.rules.evaluate`)."""
    return evaluate(CLAIMS_RULES, facts(root), root.name)


# ---- evidence figures for notebook 09 ------------------------------------------------------


@needs("ncu_width_b8")
def occupancy_figure(root: DataRoot):
    """Time-weighted achieved occupancy per width, batch 8 (claims 2 and 3)."""
    table = analyse_heatmaps.layer_table(root.load(analyse_heatmaps.WIDTH_NCU))
    s = analyse_heatmaps.config_summary(table, by="width")
    df = pd.DataFrame(
        {"width": s.width, "pct": s.achieved_occupancy_tw_pct, "occupancy": "achieved"}
    )
    return plots.plot_throughput(
        df,
        x="width",
        y="pct",
        color="occupancy",
        log_y=False,
        title=f"YOLOv8 fp16 NHWC batch 8: time-weighted occupancy (%) vs width "
        f"({root.device_name()}, Nsight Compute)",
    )


@needs("ncu_throughput_w1")
def occupancy_vs_tensor_figure(root: DataRoot):
    """Every kernel of the YOLOv8 throughput set: theoretical occupancy against tensor-pipe use,
    marker area ~ duration (claim 6)."""
    import plotly.express as px

    k = add_kernel_class(root.load("ncu_throughput_w1"))
    fig = px.scatter(
        k,
        x="theoretical_occupancy_pct",
        y="tensor_pipe_pct",
        color="kernel_class",
        size="duration_us",
        size_max=30,
        facet_col="config",
        hover_data=["layer", "grid_size"],
        template=TEMPLATE,
        color_discrete_map=color_map(k.kernel_class.unique()),
        title=f"Tensor-pipe use against theoretical occupancy per kernel ({root.device_name()}, "
        "Nsight Compute)",
    )
    fig.add_vline(x=60, line_dash="dot")
    fig.update_xaxes(title_text="theoretical occupancy (%)")
    fig.update_yaxes(title_text="tensor pipe (% of peak)", col=1)
    return finish(fig)


@needs("sweep_fp16_nhwc")
def batch_figure(root: DataRoot):
    """img/s against batch per width and backend (claims 5 and 7)."""
    s = root.load("sweep_fp16_nhwc")
    return plots.plot_throughput(
        s[s.width.isin([0.5, 1.0, 2.0])],
        x="batch",
        y="img_per_s",
        color="backend",
        facet_col="width",
        title=f"fp16 NHWC img/s vs batch ({root.device_name()})",
    )


@needs("sweep_fp16_nhwc")
def memory_figure(root: DataRoot):
    """Peak memory of the timed eager forwards against batch, per width (claim 8)."""
    s = root.load("sweep_fp16_nhwc")
    e = s[(s.backend == "eager") & (s.status == "ok")]
    if "peak_mem_bytes" not in e or e.peak_mem_bytes.isna().all():  # a sweep on a CPU
        return Note(f"The sweep of {code(root.name)} measured no GPU memory: no peak to show.")
    return plots.plot_throughput(
        e.assign(peak_mem_gb=e.peak_mem_bytes / 1e9),
        x="batch",
        y="peak_mem_gb",
        color="width",
        title=f"Peak memory (GB) vs batch, eager fp16 NHWC ({root.device_name()})",
    )


@needs("ncu_precision_w1")
def layout_figure(root: DataRoot):
    """GPU time per forward (summed kernel durations) per precision and layout (claim 16)."""
    n = root.load("ncu_precision_w1")
    t = n.groupby("config", as_index=False).duration_us.sum()
    parts = t.config.map(lambda c: parse_config(c, strict=False))
    t = t.assign(
        precision=[p["precision"] for p in parts],
        layout=[p["layout"] for p in parts],
        ms_per_forward=t.duration_us / 1e3,
    )
    return plots.plot_bars(
        t,
        x="precision",
        y="ms_per_forward",
        color="layout",
        title=f"YOLOv8 width 1.0 batch 8: GPU ms per forward by precision and layout "
        f"({root.device_name()}, Nsight Compute)",
    )

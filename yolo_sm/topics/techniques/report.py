"""Tables and figures of notebook 13, each from the root's ``techniques`` table."""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import tables
from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.sections import needs, section
from yolo_sm.report.style import finish
from yolo_sm.topics.techniques import analyse

DATASET = analyse.DATASET
NCU_RESNET = "ncu_resnet101"


def bars(df, x, y, color, title, y_title, x_title, facet="batch", line=None, **kw):
    """Grouped bars of ``y`` per ``x`` by ``color``, a panel per ``facet``, a dotted line at
    ``line``."""
    import plotly.express as px

    fig = px.bar(df, x=x, y=y, color=color, barmode="group", facet_col=facet,
                 template=TEMPLATE, title=title, **kw)  # fmt: skip
    if facet:
        fig.for_each_annotation(lambda a: a.update(text=f"{facet} {a.text.split('=')[-1]}"))
        fig.update_yaxes(matches=None, showticklabels=True)
    if line is not None:
        fig.add_hline(y=line, line_dash="dot")
    fig.update_yaxes(title_text=y_title, col=1)
    return finish(fig, x_title)


@needs(NCU_RESNET)
def resnet_classes_figure(root: DataRoot):
    """Share of the ResNet-101 detector's kernel time per kernel class (Nsight Compute)."""
    ncu = root.load(NCU_RESNET)
    config = ", ".join(map(str, ncu["config"].unique())) if "config" in ncu else ""
    fig = bars(analyse.class_time(ncu), "kernel_class", "time_pct", "kernel_class",
               f"ResNet-101 detector {config}: kernel time per class, Nsight Compute",
               "share of kernel time (%)", "kernel class", facet=None,
               hover_data=["kernels", "time_us"])  # fmt: skip
    return fig.update_layout(showlegend=False)


fusion_table = section(DATASET, analyse.fusion_table, tables.show)


@needs(DATASET)
def fusion_figure(root: DataRoot):
    """img/s of each fusion variant, one panel per batch, one bar per backend."""
    return bars(analyse.fusion_table(root.load(DATASET)), "variant", "img_per_s", "backend",
                "ResNet-101: images per second, BN kept, BN folded, conv+bias+ReLU fused",
                "images per second", "fusion variant",
                category_orders={"variant": list(analyse.FUSION_ORDER)})  # fmt: skip


@needs(DATASET)
def elementwise_figure(root: DataRoot):
    """Share of kernel time in elementwise kernels per fusion variant and batch (eager)."""
    f = analyse.fusion_table(root.load(DATASET))
    e = f[f.backend == "eager"].dropna(subset=["elementwise_time_pct"])
    return bars(e.assign(batch=e.batch.astype(str)), "variant", "elementwise_time_pct", "batch",
                "ResNet-101: share of kernel time in elementwise kernels (eager)",
                "elementwise share of kernel time (%)", "fusion variant", facet=None,
                category_orders={"variant": list(analyse.FUSION_ORDER)})  # fmt: skip


autocast_table = section(DATASET, analyse.autocast_table, tables.show)


@needs(DATASET)
def autocast_figure(root: DataRoot):
    """autocast img/s over the half model's per width, one panel per batch; dotted: parity."""
    a = analyse.autocast_table(root.load(DATASET))
    return bars(a.assign(width=a.width.map("{:g}".format)), "width", "autocast_over_half",
                "backend", "autocast on the fp32 model over the model cast to half (img/s)",
                "img/s ratio, autocast / half model", "width multiplier", line=1.0)  # fmt: skip


dtype_table = section(DATASET, analyse.dtype_table, tables.show)
buffer_table = section(DATASET, analyse.buffer_table, tables.show)


@needs(DATASET)
def buffer_figure(root: DataRoot):
    """Gain (%) of each buffer variant over a new torch.stack per step, per batch and scope."""
    b = analyse.buffer_table(root.load(DATASET))
    b = b[b.variant != "stack_new"].assign(
        backend=lambda d: d.backend.where(d.scope == "step", "assembly alone")
    )
    return bars(b, "variant", "gain_pct", "backend",
                "Preallocated batch buffer: gain over a new torch.stack per step",
                "gain in img/s over torch.stack (%)", "buffer variant", line=0.0)  # fmt: skip


failures = section(DATASET, analyse.failures, tables.show)

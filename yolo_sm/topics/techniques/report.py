"""Tables and figures of the techniques notebook (13): fusion, autocast against a half model,
a preallocated batch buffer, each from the root's ``techniques`` table."""

from __future__ import annotations

from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report import tables
from yolo_sm.report.colors import TEMPLATE
from yolo_sm.report.sections import needs
from yolo_sm.report.style import finish
from yolo_sm.topics.techniques import analyse as techniques

DATASET = techniques.DATASET
NCU_RESNET = "ncu_resnet101"


def _batch_panels(fig):
    fig.for_each_annotation(lambda a: a.update(text=f"batch {a.text.split('=')[-1]}"))
    fig.update_yaxes(matches=None, showticklabels=True)
    return fig


def plot_class_time(classes, title: str | None = None):
    """Share of kernel time per kernel class, one bar per class (one profiled config)."""
    import plotly.express as px

    fig = px.bar(
        classes,
        x="kernel_class",
        y="time_pct",
        color="kernel_class",
        hover_data=[c for c in ("kernels", "time_us") if c in classes],
        template=TEMPLATE,
        title=title or "Share of kernel time per kernel class",
    )
    fig.update_yaxes(title_text="share of kernel time (%)", rangemode="tozero")
    fig.update_xaxes(title_text="kernel class")
    fig.update_layout(showlegend=False)
    return finish(fig)


def plot_fusion(fusion, title: str | None = None):
    """img/s of each fusion variant, one panel per batch, one bar per backend."""
    import plotly.express as px

    fig = px.bar(
        fusion,
        x="variant",
        y="img_per_s",
        color="backend",
        barmode="group",
        facet_col="batch",
        hover_data=[c for c in ("speedup", "kernels_per_forward", "rel_err") if c in fusion],
        category_orders={"variant": list(techniques.FUSION_ORDER)},
        template=TEMPLATE,
        title=title or "ResNet-101: images per second, BN kept, BN folded, conv+bias+ReLU fused",
    )
    _batch_panels(fig)
    fig.update_yaxes(title_text="images per second", col=1)
    fig.update_xaxes(title_text="fusion variant")
    return finish(fig)


def plot_elementwise(fusion, title: str | None = None):
    """Share of kernel time in elementwise kernels per fusion variant and batch (eager)."""
    import plotly.express as px

    e = fusion[fusion.backend == "eager"].dropna(subset=["elementwise_time_pct"])
    e = e.assign(batch=e.batch.astype(int).astype(str))
    fig = px.bar(
        e,
        x="variant",
        y="elementwise_time_pct",
        color="batch",
        barmode="group",
        category_orders={"variant": list(techniques.FUSION_ORDER)},
        template=TEMPLATE,
        title=title or "ResNet-101: share of kernel time in elementwise kernels (eager)",
    )
    fig.update_yaxes(title_text="elementwise share of kernel time (%)", rangemode="tozero")
    fig.update_xaxes(title_text="fusion variant")
    fig.update_layout(legend_title_text="batch")
    return finish(fig)


def plot_autocast(auto, title: str | None = None):
    """autocast img/s over the half model's per width, one panel per batch, one bar per
    backend; the dotted line is parity."""
    import plotly.express as px

    a = auto.assign(width=auto.width.map("{:g}".format))
    fig = px.bar(
        a,
        x="width",
        y="autocast_over_half",
        color="backend",
        barmode="group",
        facet_col="batch",
        template=TEMPLATE,
        title=title or "autocast on the fp32 model over the model cast to half (img/s ratio)",
    )
    fig.add_hline(y=1.0, line_dash="dot")
    _batch_panels(fig)
    fig.update_yaxes(title_text="img/s ratio, autocast / half model", col=1, rangemode="tozero")
    fig.update_xaxes(title_text="width multiplier")
    return finish(fig)


def plot_buffer(buf, title: str | None = None):
    """Gain of each prealloc variant over a new torch.stack per step (%), per batch, for the
    assembly alone and for assembly + forward per backend."""
    import plotly.express as px

    b = buf[buf.variant != "stack_new"].copy()
    b["backend"] = b.backend.where(b.scope == "step", "assembly alone")
    fig = px.bar(
        b,
        x="variant",
        y="gain_pct",
        color="backend",
        barmode="group",
        facet_col="batch",
        template=TEMPLATE,
        title=title or "Preallocated batch buffer: gain over a new torch.stack per step",
    )
    fig.add_hline(y=0.0, line_dash="dot")
    _batch_panels(fig)
    fig.update_yaxes(title_text="gain in img/s over torch.stack (%)", col=1)
    fig.update_xaxes(title_text="buffer variant")
    return finish(fig)


# ---- notebook 13's sections, each from the root ---------------------------------------------


def _table(root: DataRoot):
    return root.load(DATASET)


@needs(NCU_RESNET)
def resnet_classes(root: DataRoot):
    """Where the ResNet-101 detector's kernel time goes as the other notebooks run it (BN
    folded, eager), per kernel class, from its Nsight Compute table."""
    return tables.show(techniques.class_time(root.load(NCU_RESNET)))


@needs(NCU_RESNET)
def resnet_classes_figure(root: DataRoot):
    ncu = root.load(NCU_RESNET)
    config = ", ".join(map(str, ncu["config"].unique())) if "config" in ncu else ""
    return plot_class_time(
        techniques.class_time(ncu),
        title=f"ResNet-101 detector {config}: kernel time per class, Nsight Compute "
        f"({root.device_name()})",
    )


@needs(DATASET)
def fusion_table(root: DataRoot):
    """The fusion rows side by side (:func:`yolo_sm.topics.techniques.analyse.fusion_table`)."""
    return tables.show(techniques.fusion_table(_table(root)))


@needs(DATASET)
def fusion_figure(root: DataRoot):
    return plot_fusion(
        techniques.fusion_table(_table(root)),
        title=f"ResNet-101 fusion variants, images per second ({root.device_name()})",
    )


@needs(DATASET)
def elementwise_figure(root: DataRoot):
    return plot_elementwise(
        techniques.fusion_table(_table(root)),
        title=f"ResNet-101: elementwise share of kernel time, eager ({root.device_name()})",
    )


@needs(DATASET)
def autocast_table(root: DataRoot):
    return tables.show(techniques.autocast_table(_table(root)))


@needs(DATASET)
def autocast_figure(root: DataRoot):
    return plot_autocast(
        techniques.autocast_table(_table(root)),
        title=f"autocast over a half model, img/s ratio ({root.device_name()})",
    )


@needs(DATASET)
def dtype_table(root: DataRoot):
    """Per width, the module types with an fp32 output under autocast (all types below them)."""
    return tables.show(techniques.dtype_table(_table(root)))


@needs(DATASET)
def buffer_table(root: DataRoot):
    return tables.show(techniques.buffer_table(_table(root)))


@needs(DATASET)
def buffer_figure(root: DataRoot):
    return plot_buffer(
        techniques.buffer_table(_table(root)),
        title=f"Preallocated batch buffer vs torch.stack per step ({root.device_name()})",
    )


@needs(DATASET)
def failures(root: DataRoot):
    """Rows that did not run, and why."""
    return tables.show(techniques.failures(_table(root)))

"""Launch counts (notebook 08): how many kernels a YOLO forward launches, per module type, how
many fusing each C2f block (or every layer) into one kernel would remove (a bound), how many
torch.compile removed (measured), and what a launch costs the host (a CUDA graph against eager
in the same sweep). Its facts belong to the roofline topic's
(:mod:`yolo_sm.topics.roofline.analyse`,
keys ``roofline.*``), whose findings module decides notebooks 06 to 08."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import fact
from yolo_sm.analyse.hostbound import busy_time
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import parse_config
from yolo_sm.topics.deploy.analyse import compare_backends, kernels_per_forward

# the datasets this module reads (short names inside a root)
TRACE = "trace_width_b8"
TRACE_EAGER = "trace_fp8_w1_b64"
TRACE_COMPILE = "trace_compile_w1_b64"
FUSED_CONFIG = "yolov8_w1_fp16_nhwc_b64"  # the config both of those traces hold
SWEEP = "sweep_fp16_nhwc"


def width_scope(width: float) -> str:
    """The scope of a width's facts in the roofline topic: ``width=1.0``, ``width=0.25``."""
    return f"width={float(width)!r}"


def launches_per_type(trace, iteration: int = 0):
    """Kernels per forward per config and module type (Kineto trace, one iteration), with each
    type's share of the forward's launches and of its kernel time."""
    t = trace[trace.iteration == iteration]
    g = t.groupby(["config", "module_type"]).duration_us.agg(kernels="size", time_us="sum")
    g = g.reset_index()
    tot = g.groupby("config")[["kernels", "time_us"]].transform("sum")
    g["launch_share"] = g.kernels / tot.kernels
    g["time_share"] = g.time_us / tot.time_us
    g["width"] = g.config.map(lambda c: parse_config(c)["width"])
    return g.sort_values(["width", "kernels"], ascending=[True, False]).reset_index(drop=True)


def fusion_bound(trace, iteration: int = 0, fused_type: str = "C2f"):
    """Per config: launches per forward, those inside ``fused_type`` layers, how many such layers,
    and the share of all launches removed if each such layer became one kernel
    (``removed_share``), against fusing every layer into one kernel (``all_layers_removed_share``).
    An upper bound; :func:`fusion_measured` is what a real fusing engine did."""
    t = trace[trace.iteration == iteration]
    rows = []
    for cfg, g in t.groupby("config"):
        f = g[g.module_type == fused_type]
        total, nf, layers = len(g), len(f), f.layer.nunique()
        all_layers = g.layer[g.layer != ""].nunique() + int((g.layer == "").any())
        rows.append(
            {
                "config": cfg,
                "width": parse_config(cfg)["width"],
                "launches": total,
                f"{fused_type}_layers": layers,
                f"{fused_type}_launches": nf,
                f"{fused_type}_launch_share": nf / total,
                f"{fused_type}_time_share": f.duration_us.sum() / g.duration_us.sum(),
                "removed_share": (nf - layers) / total,
                "layers": all_layers,
                "all_layers_removed_share": (total - all_layers) / total,
            }
        )
    return pd.DataFrame(rows).sort_values("width").reset_index(drop=True)


def fusion_measured(kernels, eager: str = "eager", fused: str = "compile"):
    """What a measured fusion did, next to :func:`fusion_bound`'s bound: kernel launches and
    summed GPU kernel time per forward of an eager and a fusing engine (e.g. torch.compile) of
    the same model config, from one Kineto table whose ``config`` names the engine (as
    :func:`yolo_sm.topics.deploy.analyse.compare_backends` builds it), and the share of the eager
    launches
    and kernel time that the fusing engine removed."""
    missing = [c for c in (eager, fused) if c not in set(kernels.config)]
    if missing:
        raise UserError(f"no kernels of {', '.join(missing)} in the table")
    g = kernels.groupby("config")
    n_iter = g.iteration.nunique()
    per = pd.DataFrame(
        {
            "launches": kernels_per_forward(kernels),
            "kernel_ms": g.duration_us.sum() / n_iter / 1e3,
            "forwards": n_iter,
        }
    )
    e = per.loc[eager]
    out = per.loc[[eager, fused]].rename_axis("engine").reset_index()
    out["removed_launch_share"] = 1 - out.launches / e.launches
    out["removed_time_share"] = 1 - out.kernel_ms / e.kernel_ms
    return out


def fusion_compared(eager, compiled, config: str = FUSED_CONFIG):
    """:func:`fusion_measured` of two Kineto tables of the same model ``config``: an eager
    engine's and a fusing engine's (torch.compile), as separate datasets."""
    return fusion_measured(compare_backends({"eager": eager, "compile": compiled}, config))


def launch_cost(sweep, trace, batch: int = 1, precision="fp16", layout="nhwc", iteration=0):
    """Per width: eager and CUDA-graph latency at ``batch`` from a sweep (same run), the time the
    graph saves, the kernels per forward (from the trace, its own batch) and the saving per
    launch in us. A CUDA graph keeps every kernel but issues them in one call, so the saving is
    the host's launch cost (an estimate: the trace's batch may differ from ``batch``).
    ``gpu_idle_share_eager``: 1 - GPU busy time over the eager latency, the busy time the
    sweep's own (same process) where it records ``gpu_busy_ms``, else the trace's kernel time
    at the same batch (``idle_from`` says which)."""
    s = sweep[
        (sweep.status == "ok")
        & (sweep.batch == batch)
        & (sweep.precision == precision)
        & (sweep.layout == layout)
    ]
    p = s.pivot_table(index="width", columns="backend", values="median_ms")
    k = trace[trace.iteration == iteration].groupby("config").size()
    k.index = [parse_config(c)["width"] for c in k.index]
    out = p[["eager", "cudagraph"]].reset_index()
    out["graph_saves_ms"] = out.eager - out.cudagraph
    out["kernels_per_forward"] = out.width.map(k)
    out["saved_us_per_launch"] = 1e3 * out.graph_saves_ms / out.kernels_per_forward
    t = trace[trace.iteration == iteration]
    traced = float("nan")
    if {parse_config(c)["batch"] for c in t.config.unique()} == {batch}:  # same batch only
        gpu = t.groupby("config").duration_us.sum() / 1e3
        gpu.index = [parse_config(c)["width"] for c in gpu.index]
        out["gpu_kernel_ms"] = traced = out.width.map(gpu)
    own = float("nan")
    if "gpu_busy_ms" in s:  # the sweep's own GPU busy time: the same process as its latency
        own = out.width.map(s[s.backend == "eager"].set_index("width")["gpu_busy_ms"])
    busy, source = busy_time(pd.Series(own, index=out.index), traced)
    if busy.notna().any():
        out["gpu_idle_share_eager"] = 1 - busy / out.eager
        out["idle_from"] = source
    out = out.dropna(subset=["kernels_per_forward"]).reset_index(drop=True)
    out.attrs["batch"] = batch
    return out


# ---------------------------------------------------------------- facts


def launch_facts(root: DataRoot) -> list[dict]:
    """The launch facts of ``root`` (keys without the topic's prefix: :func:`yolo_sm.analyse.
    roofline.facts` prefixes them with the rest of notebooks 06-08's facts): per width the C2f
    fusion bound and the launches per forward of :data:`TRACE`, the bounds over widths, the
    eager engine's GPU idle share at batch 8 (with :data:`SWEEP`), and what torch.compile
    removed (:data:`TRACE_EAGER` against :data:`TRACE_COMPILE`)."""
    rows = []
    if root.has(TRACE):
        trace = root.load(TRACE)
        f = fusion_bound(trace)
        ds = (TRACE,)
        for r in f.itertuples():
            at = width_scope(r.width)
            rows += [
                fact("c2f_fusion_removed_launch_share", r.removed_share, "", scope=at, datasets=ds),
                fact("launches_per_forward", r.launches, "", scope=at, datasets=ds),
            ]
        rows += [
            fact("c2f_fusion_removed_launch_share", f.removed_share.max(), "", datasets=ds,
                 note="the most over widths: each C2f block one kernel (a bound)"),
            fact("c2f_fusion_removed_launch_share_min", f.removed_share.min(), "", datasets=ds),
            fact("all_layers_fusion_removed_launch_share", f.all_layers_removed_share.max(), "",
                 datasets=ds, note="every layer one kernel (a bound)"),
        ]  # fmt: skip
        if root.has(SWEEP):
            cost = launch_cost(root.load(SWEEP), trace, batch=8)
            if "gpu_idle_share_eager" in cost:
                for r in cost.itertuples():
                    rows.append(
                        fact("eager_gpu_idle_share", r.gpu_idle_share_eager, "",
                             scope=f"{width_scope(r.width)},batch=8", datasets=(SWEEP, TRACE))
                    )  # fmt: skip
    if root.has(TRACE_EAGER) and root.has(TRACE_COMPILE):
        try:
            fused = fusion_compared(root.load(TRACE_EAGER), root.load(TRACE_COMPILE))
        except UserError:  # the traces hold other configs
            fused = None
        if fused is not None:
            m = fused.set_index("engine").loc["compile"]
            ds = (TRACE_EAGER, TRACE_COMPILE)
            rows += [
                fact("compile_removed_launch_share", m.removed_launch_share, "", datasets=ds),
                fact("compile_removed_time_share", m.removed_time_share, "", datasets=ds),
            ]
            if root.has(TRACE):
                bound = fusion_bound(root.load(TRACE)).removed_share.min()
                rows.append(
                    fact("compile_minus_c2f_bound_launch_share", m.removed_launch_share - bound,
                         "", datasets=(*ds, TRACE),
                         note="measured torch.compile removal minus the C2f-fusion bound")
                )  # fmt: skip
    return rows

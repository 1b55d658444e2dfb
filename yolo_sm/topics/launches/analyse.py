"""Launch counts (notebook 08): kernels per forward and module type, what fusing C2f blocks
would remove (a bound), what torch.compile removed, what a launch costs the host. Facts get
their ``roofline.`` prefix from :func:`yolo_sm.topics.roofline.analyse.facts`."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import fact
from yolo_sm.analyse.hostbound import busy_time
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import parse_config
from yolo_sm.topics.deploy.analyse import compare_backends, kernels_per_forward

TRACE = "trace_width_b8"
TRACE_EAGER = "trace_fp8_w1_b64"
TRACE_COMPILE = "trace_compile_w1_b64"
FUSED_CONFIG = "yolov8_w1_fp16_nhwc_b64"  # the config both of those traces hold
SWEEP = "sweep_fp16_nhwc"


def _width(configs) -> list[float]:
    return [parse_config(c)["width"] for c in configs]


def launches_per_type(trace, iteration: int = 0):
    """Kernels per forward per config and module type, with launch and time shares."""
    t = trace[trace.iteration == iteration]
    g = t.groupby(["config", "module_type"]).duration_us.agg(kernels="size", time_us="sum")
    g = g.reset_index()
    tot = g.groupby("config")[["kernels", "time_us"]].transform("sum")
    g["launch_share"], g["time_share"] = g.kernels / tot.kernels, g.time_us / tot.time_us
    g["width"] = _width(g.config)
    return g.sort_values(["width", "kernels"], ascending=[True, False]).reset_index(drop=True)


def fusion_bound(trace, iteration: int = 0, fused_type: str = "C2f"):
    """Per config: launches, those in ``fused_type`` layers, and the share removed if
    each such layer (or every layer) became one kernel: upper bounds."""
    rows = []
    for cfg, g in trace[trace.iteration == iteration].groupby("config"):
        f, total = g[g.module_type == fused_type], len(g)
        layers = g.layer[g.layer != ""].nunique() + int((g.layer == "").any())
        rows.append({
            "config": cfg, "width": parse_config(cfg)["width"], "launches": total,
            f"{fused_type}_layers": f.layer.nunique(), f"{fused_type}_launches": len(f),
            f"{fused_type}_launch_share": len(f) / total,
            f"{fused_type}_time_share": f.duration_us.sum() / g.duration_us.sum(),
            "removed_share": (len(f) - f.layer.nunique()) / total,
            "layers": layers, "all_layers_removed_share": (total - layers) / total,
        })  # fmt: skip
    return pd.DataFrame(rows).sort_values("width").reset_index(drop=True)


def fusion_measured(kernels, eager: str = "eager", fused: str = "compile"):
    """Launches and kernel ms per forward of an eager and a fusing engine, and the
    shares the fusing one removed."""
    missing = [c for c in (eager, fused) if c not in set(kernels.config)]
    if missing:
        raise UserError(f"no kernels of {', '.join(missing)} in the table")
    g = kernels.groupby("config")
    ms = g.duration_us.sum() / g.iteration.nunique() / 1e3
    per = pd.DataFrame({"launches": kernels_per_forward(kernels), "kernel_ms": ms})
    out = per.loc[[eager, fused]].rename_axis("engine").reset_index()
    out["removed_launch_share"] = 1 - out.launches / per.launches[eager]
    out["removed_time_share"] = 1 - out.kernel_ms / per.kernel_ms[eager]
    return out


def fusion_compared(eager, compiled, config: str = FUSED_CONFIG):
    """:func:`fusion_measured` of an eager and a torch.compile Kineto table of ``config``."""
    return fusion_measured(compare_backends({"eager": eager, "compile": compiled}, config))


def launch_cost(sweep, trace, batch: int = 1, precision="fp16", layout="nhwc", iteration=0):
    """Per width at ``batch``: eager and graph latency, the time the graph saves,
    kernels per forward and us saved per launch; ``gpu_idle_share_eager`` where known."""
    s = sweep[(sweep.status == "ok") & (sweep.batch == batch) & (sweep.precision == precision)
              & (sweep.layout == layout)]  # fmt: skip
    out = s.pivot_table(index="width", columns="backend", values="median_ms")
    out = out[["eager", "cudagraph"]].reset_index()
    t = trace[trace.iteration == iteration]
    per = t.groupby("config").duration_us.agg(["size", "sum"])
    per.index = _width(per.index)
    out["graph_saves_ms"] = out.eager - out.cudagraph
    out["kernels_per_forward"] = out.width.map(per["size"])
    out["saved_us_per_launch"] = 1e3 * out.graph_saves_ms / out.kernels_per_forward
    traced = float("nan")
    if {parse_config(c)["batch"] for c in t.config.unique()} == {batch}:  # same batch only
        out["gpu_kernel_ms"] = traced = out.width.map(per["sum"] / 1e3)
    own = float("nan")
    if "gpu_busy_ms" in s:
        own = out.width.map(s[s.backend == "eager"].set_index("width").gpu_busy_ms)
    busy, source = busy_time(pd.Series(own, index=out.index), traced)
    if busy.notna().any():
        out["gpu_idle_share_eager"], out["idle_from"] = 1 - busy / out.eager, source
    return out.dropna(subset=["kernels_per_forward"]).reset_index(drop=True)


def launch_facts(root: DataRoot) -> list[dict]:
    """The C2f fusion bound (most over widths), eager idle share at width 0.25 batch 8,
    and torch.compile's removed share minus the C2f bound."""
    rows = []
    if root.has(TRACE):
        trace = root.load(TRACE)
        share = fusion_bound(trace).removed_share.max()
        rows.append(fact("c2f_fusion_removed_launch_share", share, datasets=(TRACE,)))
        if root.has(SWEEP):
            cost = launch_cost(root.load(SWEEP), trace, batch=8).set_index("width")
            if "gpu_idle_share_eager" in cost and 0.25 in cost.index:
                idle = cost.gpu_idle_share_eager[0.25]
                rows.append(fact("eager_gpu_idle_share", idle, scope="width=0.25,batch=8",
                                 datasets=(SWEEP, TRACE)))  # fmt: skip
    if root.has(TRACE_EAGER) and root.has(TRACE_COMPILE):
        eager = root.load(TRACE_EAGER)
        try:
            fused = fusion_compared(eager, root.load(TRACE_COMPILE)).set_index("engine")
        except UserError:  # the traces hold other configs
            return rows
        bound = fusion_bound(eager[eager.config == FUSED_CONFIG]).removed_share.iloc[0]
        diff = fused.removed_launch_share["compile"] - bound
        ds = (TRACE_EAGER, TRACE_COMPILE)
        rows.append(fact("compile_minus_c2f_bound_launch_share", diff, datasets=ds))
    return rows

"""Launches and the host (notebook 08): kernels per forward and module type, what fusing C2f
blocks would remove (a bound), what torch.compile removed, what a launch costs the host
(:func:`launch_facts`, prefixed ``roofline.`` by the roofline's facts), and the host's share of
each sweep point: CPU time, launches, GPU busy time (:func:`facts`, keys ``hosts.*``)."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
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


PREFIX = "hosts."
#: the columns a sweep row carries when the host's share was measured
HOST_COLUMNS = ("host_cpu_ms", "launches_per_forward", "gpu_busy_ms", "host_bound")
#: the columns of :func:`small_batch_view`
VIEW_COLUMNS = ("width", "batch", "median_ms", "mean_ms", "host_cpu_ms", "cpu_over_forward",
                "launches_per_forward", "gpu_busy_ms", "gpu_busy_pct", "us_per_launch",
                "host_bound")  # fmt: skip


def host_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """One row per ``ok`` point with host columns: CPU time per forward and over the mean
    forward, launches, GPU busy ms and %, us per launch, host-bound, CPU; empty without them."""
    if not all(c in sweep for c in HOST_COLUMNS) or sweep.gpu_busy_ms.isna().all():
        return pd.DataFrame(columns=[*VIEW_COLUMNS, "backend", "cpu_model", "cpu_count"])
    ok = sweep[(sweep.status == "ok") & sweep.gpu_busy_ms.notna()]
    keys = ["width", "precision", "layout", "backend", "batch", "median_ms", "host_cpu_ms",
            "launches_per_forward", "gpu_busy_ms"]  # fmt: skip
    out = (
        ok[keys]
        .astype({c: float for c in keys[5:]})
        .assign(
            mean_ms=ok.get("mean_ms", ok.median_ms).astype(float),
            host_bound=ok.host_bound.astype("boolean").fillna(False).astype(bool),
            cpu_model=ok.get("prov_cpu_model", pd.Series("", index=ok.index)).astype(str),
            cpu_count=ok.get("prov_cpu_count", pd.Series(math.nan, index=ok.index)),
        )
    )
    out["cpu_over_forward"] = out.host_cpu_ms / out.mean_ms
    out["gpu_busy_pct"] = 100 * (out.gpu_busy_ms / out.median_ms).clip(upper=1)
    out["us_per_launch"] = 1e3 * out.host_cpu_ms / out.launches_per_forward
    return out.sort_values(["backend", "width", "batch"]).reset_index(drop=True)


def small_batch_view(table: pd.DataFrame, backend: str = "eager") -> pd.DataFrame:
    """``backend``'s rows at its smallest batch, :data:`VIEW_COLUMNS`."""
    rows = table[table.backend == backend]
    return rows[rows.batch == rows.batch.min()].reindex(columns=list(VIEW_COLUMNS))


def cpu_of(table: pd.DataFrame) -> str:
    """The host CPU(s) of the table's points ("" if unknown)."""
    models = [m for m in dict.fromkeys(table.cpu_model.astype(str)) if m and m != "nan"]
    counts = sorted({int(c) for c in pd.to_numeric(table.cpu_count, errors="coerce").dropna()})
    text = ", ".join(models)
    return f"{text} ({', '.join(map(str, counts))} logical CPUs)" if text and counts else text


def host_bound_edge(table: pd.DataFrame, backend: str = "eager") -> pd.DataFrame:
    """Per width: the largest host-bound batch and the smallest GPU-bound one."""
    g = table[table.backend == backend].groupby("width")
    return pd.DataFrame({
        "largest_host_bound_batch": g.apply(lambda d: d.batch[d.host_bound].max()),
        "smallest_gpu_bound_batch": g.apply(lambda d: d.batch[~d.host_bound].min()),
    }).reset_index()  # fmt: skip


#: the facts a rule reads
KEYS = ("eager_b1_host_bound_share_pct", "eager_b1_cpu_over_forward", "graph_max_gpu_idle_pct")
FACT_KEYS = frozenset(PREFIX + k for k in KEYS)


def facts(root: DataRoot, sweep: str = SWEEP) -> pd.DataFrame:
    """Host facts at eager batch 1 (% of widths host-bound, median CPU over forward) and the
    most any CUDA-graph point leaves the GPU idle (%)."""
    t = host_table(root.load(sweep)) if root.has(sweep) else pd.DataFrame()
    if t.empty:
        return facts_table([])
    ds, graph = (sweep,), t[t.backend == "cudagraph"]
    b1 = t[(t.backend == "eager") & (t.batch == 1)]
    n1, note = len(b1), f"host CPU {cpu_of(t)}"
    return facts_table([
        fact(PREFIX + "eager_b1_host_bound_share_pct", 100 * b1.host_bound.mean(), "%",
             datasets=ds, note=note, points=n1),
        fact(PREFIX + "eager_b1_cpu_over_forward", b1.cpu_over_forward.median(), "x",
             datasets=ds, note=note, points=n1),
        fact(PREFIX + "graph_max_gpu_idle_pct", 100 - graph.gpu_busy_pct.min(), "%",
             datasets=ds, points=len(graph)),
    ])  # fmt: skip

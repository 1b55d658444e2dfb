"""Occupancy primer (notebook 00): the calculator on the launch holding most tensor-core conv
time (the flagship), a real kernel per limit, waves, and the SIMT contrast, from Nsight Compute.
Times in us, occupancy and shares in %, shared memory in bytes."""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.bench_table import load_present
from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import (
    ARCH,
    LIMIT_COLUMNS,
    RESOURCES,
    binding,
    limits_table,
    theoretical_occupancy,
)
from yolo_sm.analyse.weighting import sm_coverage, weighted_mean
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config

NCU, WIDE, SIMT_TABLE = "ncu_width_b8", "ncu_wide_stack", "ncu_precision_w1"
NCU_TABLES = ("ncu_width_b8", "ncu_batch_w1", "ncu_precision_w1", "ncu_wide_stack", "ncu_resnet101")
#: kernel classes that move data rather than multiply matrices
MEMORY_CLASSES = ("elementwise", "copy_concat", "pooling_upsample")
#: the rule of thumb's line: "below 60 % occupancy wastes the GPU" (achieved occupancy, %)
LOW_OCCUPANCY_PCT = 60.0
#: the calculator's example where a root has no Nsight Compute table (a Hopper SM)
EXAMPLE_LAUNCH = {"compute_capability": "9.0", "threads_per_block": 256,
                  "registers_per_thread": 32, "shared_mem_per_block": 0}  # fmt: skip
LAUNCH = ["block_size", "registers_per_thread", "shared_mem_per_block_bytes"]
#: threads of one Hopper warpgroup (four warps issue one wgmma together)
WARPGROUP_THREADS = 128


def _machine(root: DataRoot, key: str, ncu: pd.DataFrame | None) -> str:
    v = str(root.machine().get(key, "")).split(", ")[0]
    if not v and ncu is not None and f"prov_{key}" in ncu and len(ncu):
        v = str(ncu[f"prov_{key}"].dropna().astype(str).iloc[0])
    return v


def sm_count(root: DataRoot, ncu: pd.DataFrame | None = None) -> int | None:
    """The GPU's SM count from provenance (the root's, else the ``ncu`` rows'); None if none."""
    try:
        return int(float(_machine(root, "sm_count", ncu)))
    except ValueError:
        return None


def compute_capability(root: DataRoot, ncu: pd.DataFrame | None = None) -> str | None:
    """The GPU's compute capability from provenance when the calculator knows it, else None."""
    cc = _machine(root, "compute_capability", ncu)
    return cc if cc in ARCH else None


def kernels_of(root: DataRoot, names=NCU_TABLES) -> pd.DataFrame | None:
    """Every kernel of the tables ``names`` the root holds, with ``source`` and class."""
    k = load_present(root, names, tag="source")
    return None if k is None else add_kernel_class(k)


def flagship_launch(root: DataRoot, name: str = NCU) -> dict:
    """The calculator's arguments for the flagship launch shape of ``name`` (else
    :data:`EXAMPLE_LAUNCH`), with ``source`` and ``time_share``."""
    k = add_kernel_class(root.load(name)) if root.has(name) else None
    tc = k[k.kernel_class == "tensor_core_conv"] if k is not None else None
    if tc is None or tc.empty:
        return {**EXAMPLE_LAUNCH, "source": "example", "time_share": math.nan}
    by = tc.groupby(LAUNCH).duration_us.sum()
    b, r, s = by.idxmax()
    return {
        "compute_capability": compute_capability(root, k) or EXAMPLE_LAUNCH["compute_capability"],
        "threads_per_block": int(b),
        "registers_per_thread": int(r),
        "shared_mem_per_block": int(s),
        "source": name,
        "time_share": float(by.max() / by.sum()),
    }


def flagship_kernels(k: pd.DataFrame, launch: dict) -> pd.DataFrame:
    """The kernels of ``k`` launched with ``launch``'s shape."""
    keys = ("threads_per_block", "registers_per_thread", "shared_mem_per_block")
    return k[(k[LAUNCH] == pd.Series([launch[c] for c in keys], index=LAUNCH)).all(axis=1)]


def limit_examples(k: pd.DataFrame) -> pd.DataFrame:
    """Per limit, the launch shape with most time among kernels that limit alone
    binds (else where it comes nearest: ``how``, ``headroom``), with occupancy, kernels, time."""
    cols = list(LIMIT_COLUMNS.values())
    k = k.dropna(subset=cols + LAUNCH)
    bind, low = binding(k), k[cols].min(axis=1)
    rows = []
    for name, col in LIMIT_COLUMNS.items():
        alone, how = k[bind[name] & (bind.sum(axis=1) == 1)], "alone"
        if alone.empty:
            ratio = k[col] / low
            alone, how = k[ratio == ratio.min()], "nearest"
        g = alone.groupby(LAUNCH + ["kernel_class"])
        sel = g.get_group(g.duration_us.sum().idxmax())
        first = sel.loc[sel.duration_us.idxmax()]
        rows.append({
            "limit": name, "how": how, "kernel_class": first.kernel_class,
            "kernel": str(first.kernel_name)[:40], "source": first.source,
            **{c: first[c] for c in LAUNCH}, **{c: int(first[c]) for c in cols},
            "headroom": float(first[col] / first[cols].min()),
            "theoretical_occupancy_pct": float(sel.theoretical_occupancy_pct.median()),
            "achieved_occupancy_pct": float(sel.achieved_occupancy_pct.median()),
            "kernels": len(sel), "time_us": float(sel.duration_us.sum()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def block_cap_what_if(example: pd.Series, cc: str, threads: int = 32) -> pd.DataFrame:
    """Blocks per SM each limit allows for ``example`` as launched and with
    ``threads`` per block; theoretical occupancy last."""
    regs, smem = int(example.registers_per_thread), int(example.shared_mem_per_block_bytes)
    out = {}
    for label, t in (("as launched", int(example.block_size)), (f"with {threads} threads",
                                                                 threads)):  # fmt: skip
        r = theoretical_occupancy(cc, t, regs, smem)
        out[label] = [*limits_table(r).blocks_per_sm, r.occupancy_pct]
    out = pd.DataFrame(out, index=[*LIMIT_COLUMNS, "occupancy %"])
    return out.rename_axis("limit").reset_index()


def allocation_steps(launch: dict) -> pd.DataFrame:
    """The calculator's arithmetic for one ``launch``, step by step (``step``,
    ``value``, ``unit``)."""
    cc, threads = launch["compute_capability"], launch["threads_per_block"]
    regs, smem = launch["registers_per_thread"], launch["shared_mem_per_block"]
    spec, r = ARCH[cc], theoretical_occupancy(cc, threads, regs, smem)
    rows = [
        ("threads per block", threads, "threads"),
        ("warps per block (threads / 32, rounded up)", r.warps_per_block, "warps"),
        ("registers per thread", regs, "registers"),
        (f"registers per warp (x 32, rounded up to {spec.register_allocation_unit})",
         r.registers_per_block_allocated // max(r.warps_per_block, 1), "registers"),
        ("registers per block", r.registers_per_block_allocated, "registers"),
        ("register file per SM", spec.registers_per_sm, "registers"),
        ("blocks the registers allow", r.block_limit_registers, "blocks"),
        ("shared memory per block (static + dynamic)", smem, "bytes"),
        ("reserved by the driver per block", spec.reserved_shared_mem_per_block, "bytes"),
        (f"allocated per block (rounded up to {spec.shared_mem_allocation_unit} B)",
         r.shared_mem_per_block_allocated, "bytes"),
        ("carve-out the driver picks (shared memory per SM)", r.shared_mem_config_bytes, "bytes"),
        ("blocks the shared memory allows", r.block_limit_shared_mem, "blocks"),
        ("blocks the warp slots allow", r.block_limit_warps, "blocks"),
        ("block slots per SM", r.block_limit_blocks, "blocks"),
        ("active blocks per SM (the smallest limit)", r.active_blocks_per_sm, "blocks"),
        ("theoretical occupancy", r.occupancy_pct, "%"),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["step", "value", "unit"])


def carveouts(k: pd.DataFrame, cc: str) -> pd.DataFrame:
    """Per shared-memory carve-out of ``cc`` (bytes per SM): kernels, time share, median
    shared memory per block."""
    g = k.groupby("shared_mem_config_bytes")
    t = pd.DataFrame({
        "kernels": g.size(), "time_share": g.duration_us.sum() / k.duration_us.sum(),
        "median_shared_mem_per_block_bytes": g.shared_mem_per_block_bytes.median(),
    }).reindex(ARCH[cc].shared_mem_carveouts)  # fmt: skip
    t["kernels"] = t.kernels.fillna(0).astype(int)
    return t.fillna({"time_share": 0.0}).rename_axis("carveout_bytes").reset_index()


def utilisation_curve(sm_count: int, active_blocks_per_sm: int = 1, max_waves: int = 3):
    """SM coverage (%) against grid size when every block takes as long."""
    slots = sm_count * active_blocks_per_sm
    g = pd.Series(range(1, max_waves * slots + 1))
    return pd.DataFrame({"grid_size": g, "waves": -(-g // slots),
                         "utilisation_pct": 100 * sm_coverage(g / slots)})  # fmt: skip


def tail_example(flag: pd.DataFrame, sm_count: int) -> dict:
    """The grid with most flagship time on ``sm_count`` SMs: idle SMs, SM coverage
    and occupancy (%, time-weighted), time share."""
    by = flag.groupby("grid_size").duration_us.sum()
    grid = int(by.idxmax())
    sel = flag[flag.grid_size == grid]
    return {
        "grid_size": grid,
        "sm_count": sm_count,
        "idle_sms": (-grid) % sm_count,
        "sm_coverage_pct": 100 * weighted_mean(pd.Series(sm_coverage(sel.waves_per_sm),
                                                         sel.index), sel.duration_us),
        "achieved_occupancy_tw_pct": weighted_mean(sel.achieved_occupancy_pct, sel.duration_us),
        "theoretical_occupancy_tw_pct": weighted_mean(sel.theoretical_occupancy_pct,
                                                      sel.duration_us),
        "time_share": float(by.max() / by.sum()),
    }  # fmt: skip


def hopper_mechanism(flag: pd.DataFrame, cc: str, sm_count: int, pipe: pd.DataFrame | None):
    """The flagship launch's numbers behind the one-block-per-SM design and what
    each is spent on; ``pipe`` adds its tensor-pipe use."""
    spec, f = ARCH[cc], flag.iloc[0]
    threads, regs, smem = (int(f[c]) for c in LAUNCH)
    r = theoretical_occupancy(cc, threads, regs, smem)
    tw = weighted_mean(flag.achieved_occupancy_pct, flag.duration_us)
    rows = [
        ("threads per block", threads, "threads",
         f"{threads // WARPGROUP_THREADS} warpgroups of {WARPGROUP_THREADS} threads: warp "
         "specialisation, a producer warpgroup issues TMA loads, consumer warpgroups issue wgmma"),
        ("registers per block", r.registers_per_block_allocated, "registers",
         f"{100 * r.registers_per_block_allocated / spec.registers_per_sm:.1f} % of the "
         "register file: the wgmma accumulators of a large output tile live in registers"),
        ("shared memory per block", smem, "bytes",
         f"{100 * smem / spec.max_shared_mem_per_block:.1f} % of the "
         f"{spec.max_shared_mem_per_block:,} B a block may opt in to: a multi-stage TMA / "
         "mbarrier pipeline of input tiles"),
        ("active blocks per SM", r.active_blocks_per_sm, "blocks",
         f"theoretical occupancy {r.occupancy_pct:.2f} % ({r.active_warps_per_sm} of "
         f"{r.max_warps_per_sm} warps)"),
        ("largest grid", int(flag.grid_size.max()), "blocks",
         f"on {sm_count} SMs; {100 * (flag.grid_size <= sm_count).mean():.0f} % of launches run "
         "at most one block per SM: a persistent tile scheduler loops over output tiles"),
        ("achieved occupancy (time-weighted)", tw, "%",
         "few warps resident: latency is hidden by asynchronous copies and instruction-level "
         "parallelism, not by switching between many warps"),
    ]  # fmt: skip
    p = pipe[(pipe.block_size == threads) & (pipe.registers_per_thread == regs)] if (
        pipe is not None and "tensor_pipe_pct" in pipe) else []  # fmt: skip
    if len(p):
        rows.append(("tensor pipe active (time-weighted)",
                     weighted_mean(p.tensor_pipe_pct, p.duration_us), "%",
                     f"the same launch shape in {WIDE}: the tensor cores stay busy at "
                     f"{weighted_mean(p.achieved_occupancy_pct, p.duration_us):.1f} % achieved "
                     "occupancy"))  # fmt: skip
    return pd.DataFrame(rows, columns=["quantity", "value", "unit", "what it means"])


def pipe_vs_occupancy(ncu: pd.DataFrame) -> pd.DataFrame:
    """Per kernel of a full-set capture: class, time, occupancy, tensor-pipe and SM throughput."""
    cols = ["config", "kernel_name", "kernel_class", "duration_us", "theoretical_occupancy_pct",
            "achieved_occupancy_pct", "tensor_pipe_pct", "sm_throughput_pct",
            "dram_throughput_pct", "block_size", "registers_per_thread"]  # fmt: skip
    k = add_kernel_class(ncu)
    return k[[c for c in cols if c in k]].copy()


def simt_contrast(ncu: pd.DataFrame) -> pd.DataFrame:
    """Per config: conv GPU ms per forward, its main conv class, time-weighted
    achieved occupancy and ``x_fastest``, fastest first."""
    k = add_kernel_class(ncu)
    conv = k[k.kernel_class.isin(["simt_conv", "tensor_core_conv"])]
    rows = [{"config": cfg,
             "conv_class": g.groupby("kernel_class").duration_us.sum().idxmax(),
             "conv_ms": g.duration_us.sum() / 1e3,
             "achieved_occupancy_tw_pct": weighted_mean(g.achieved_occupancy_pct, g.duration_us)}
            for cfg, g in conv.groupby("config")]  # fmt: skip
    out = pd.DataFrame(rows).sort_values("conv_ms", ignore_index=True)
    return out.assign(x_fastest=out.conv_ms / out.conv_ms.min())


def simt_vs_tensor(contrast: pd.DataFrame) -> dict:
    """The slowest SIMT-conv config against the fastest tensor-core one ({} if none)."""
    s = contrast[contrast.conv_class == "simt_conv"]
    t = contrast[contrast.conv_class == "tensor_core_conv"]
    if s.empty or t.empty:
        return {}
    slow, fast = s.iloc[-1], t.iloc[0]
    return {"simt_config": slow.config, "tensor_config": fast.config,
            "time_ratio": slow.conv_ms / fast.conv_ms,
            "simt_achieved_occupancy_pct": slow.achieved_occupancy_tw_pct,
            "tensor_achieved_occupancy_pct": fast.achieved_occupancy_tw_pct}  # fmt: skip


def focus_config(ncu: pd.DataFrame) -> str:
    """The forward to look at: width 1.0 or the nearest, else most kernel time."""
    widths = {}
    for c in dict.fromkeys(ncu.config):
        try:
            widths[c] = parse_config(c)["width"]
        except ValueError:
            continue
    if widths:
        return min(widths, key=lambda c: (abs(widths[c] - 1.0), widths[c]))
    return str(ncu.groupby("config").duration_us.sum().idxmax())


def forward(ncu: pd.DataFrame, config: str | None = None) -> pd.DataFrame:
    """The kernels of one forward (default :func:`focus_config`) with their kernel class."""
    return add_kernel_class(ncu[ncu.config == (config or focus_config(ncu))])


def tensor_core_occupancy_levels(ncu: pd.DataFrame) -> pd.DataFrame:
    """Share of tensor-core conv time per theoretical occupancy level."""
    k = add_kernel_class(ncu)
    tc = k[k.kernel_class == "tensor_core_conv"].round({"theoretical_occupancy_pct": 2})
    mode = ("block_size", lambda s: s.mode().iloc[0])
    out = tc.groupby("theoretical_occupancy_pct").agg(
        time_us=("duration_us", "sum"), kernels=("duration_us", "size"), block_size=mode,
        registers_per_thread=("registers_per_thread", lambda s: s.mode().iloc[0]),
    ).reset_index()  # fmt: skip
    out["time_share"] = out.time_us / out.time_us.sum()
    return out.sort_values("time_share", ascending=False, ignore_index=True)


def calculator_mismatches(ncu: pd.DataFrame, cc: str, tolerance: float = 0.01) -> pd.DataFrame:
    """Distinct launch shapes with ncu's and the calculator's theoretical
    occupancy and ``mismatch`` (``tolerance`` points apart or more)."""
    u = ncu[LAUNCH + ["theoretical_occupancy_pct"]].drop_duplicates().reset_index(drop=True)
    u["calculator_pct"] = [theoretical_occupancy(cc, int(b), int(r), int(s)).occupancy_pct
                           for b, r, s in u[LAUNCH].itertuples(index=False)]  # fmt: skip
    u["mismatch"] = (u.calculator_pct - u.theoretical_occupancy_pct).abs() >= tolerance
    return u


#: the facts a rule reads
FACT_KEYS = frozenset(
    """
    calculator_mismatch_share flagship_resource_limits flagship_grid_at_most_sm_count_share
    memory_minus_tc_conv_achieved_occupancy_pct_points simt_over_tensor_conv_time_ratio
    simt_tensor_conv_achieved_occupancy_gap_pct_points tc_conv_time_share_below_60_achieved
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The primer's facts; a dataset the root lacks leaves its facts out."""
    rows = []
    k = kernels_of(root)
    if root.has(NCU):
        ncu = root.load(NCU)
        cfg = focus_config(ncu)
        f = forward(ncu, cfg)
        tc, mem = f[f.kernel_class == "tensor_core_conv"], f[f.kernel_class.isin(MEMORY_CLASSES)]
        low = tc.duration_us[tc.achieved_occupancy_pct < LOW_OCCUPANCY_PCT].sum()

        def ach(d):
            return weighted_mean(d.achieved_occupancy_pct, d.duration_us)

        note, ds = f"forward {cfg}", (NCU,)
        rows += [
            fact("tc_conv_time_share_below_60_achieved",
                 100 * low / tc.duration_us.sum() if len(tc) else math.nan, "%", datasets=ds,
                 note=note),
            fact("memory_minus_tc_conv_achieved_occupancy_pct_points", ach(mem) - ach(tc), "points",
                 datasets=ds, note=note),
        ]  # fmt: skip
    cc = compute_capability(root, k)
    if k is not None and cc:
        m = calculator_mismatches(k, cc)
        held = sorted(set(k.source))
        rows.append(fact("calculator_mismatch_share", 100 * m.mismatch.mean(), "%", datasets=held,
                         note=f"of {len(m)} distinct launch shapes"))  # fmt: skip
    launch, sms = flagship_launch(root), sm_count(root, k)
    flag = flagship_kernels(k, launch) if k is not None else []
    if len(flag) and launch["source"] != "example":
        ds = tuple(sorted(set(flag.source)))
        res = binding(flag)[list(RESOURCES)].all(axis=0).sum()
        note = "of registers and shared memory, how many set its active blocks"
        rows.append(fact("flagship_resource_limits", res, "limits", datasets=ds, note=note))
        if sms:
            rows.append(fact("flagship_grid_at_most_sm_count_share",
                             100 * (flag.grid_size <= sms).mean(), "%", datasets=ds,
                             note=f"launches of the flagship shape on {sms} SMs"))  # fmt: skip
    if root.has(SIMT_TABLE) and (s := simt_vs_tensor(simt_contrast(root.load(SIMT_TABLE)))):
        note, ds = f"{s['simt_config']} vs {s['tensor_config']}", (SIMT_TABLE,)
        gap = abs(s["simt_achieved_occupancy_pct"] - s["tensor_achieved_occupancy_pct"])
        rows += [
            fact("simt_over_tensor_conv_time_ratio", s["time_ratio"], "x", datasets=ds, note=note),
            fact("simt_tensor_conv_achieved_occupancy_gap_pct_points", gap, "points",
                 datasets=ds, note=note),
        ]  # fmt: skip
    return facts_table(rows)

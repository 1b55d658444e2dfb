"""The occupancy primer's lessons on real kernels (notebook 00): one kernel of the root's
Nsight Compute tables for each of the four limits, the allocation arithmetic and the
shared-memory carve-out, wave quantisation with a real tail, the Hopper mechanism behind the
one-block-per-SM tensor-core kernels, the SIMT fp32 convolutions that are slow at a similar
occupancy, and questions for the reader whose answers are computed.

Every function reads tables (or a root) and returns a DataFrame or a dict; nothing here is a
literal measurement. Units: threads, warps, blocks and registers are counts; shared memory is
in bytes; times in microseconds; occupancy and shares in percent unless a name ends in
``_share`` (a fraction).
"""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import ARCH, limits_table, theoretical_occupancy
from yolo_sm.analyse.weighting import sm_coverage, weighted_mean
from yolo_sm.contract.datasets import DataRoot

#: Tables the four-limit examples are chosen from (those the root holds).
LIMIT_TABLES = (
    "ncu_width_b8",
    "ncu_batch_w1",
    "ncu_precision_w1",
    "ncu_wide_stack",
    "ncu_resnet101",
)
#: Nsight Compute's block limits per SM, by the calculator's limit names.
LIMIT_COLUMNS = {
    "registers": "limit_registers",
    "shared_mem": "limit_shared_mem",
    "warps": "limit_warps",
    "blocks": "limit_blocks",
}
LAUNCH = ["block_size", "registers_per_thread", "shared_mem_per_block_bytes"]
#: Threads of one Hopper warpgroup (four warps issue one wgmma together).
WARPGROUP_THREADS = 128
#: The precision tables' configs the SIMT contrast compares (fp32 against fp16, same layout).
SIMT_TABLE = "ncu_precision_w1"
#: Full-metric table whose tensor-pipe use shows what the flagship launch keeps busy.
PIPE_TABLE = "ncu_wide_stack"


def kernels_of(root: DataRoot, names=LIMIT_TABLES) -> pd.DataFrame | None:
    """Every kernel of the tables ``names`` the root holds, with ``source`` (table) and
    ``kernel_class``; None when it holds none."""
    held = [n for n in names if root.has(n)]
    if not held:
        return None
    return add_kernel_class(
        pd.concat([root.load(n).assign(source=n) for n in held], ignore_index=True)
    )


def limit_examples(k: pd.DataFrame) -> pd.DataFrame:
    """One row per limit (registers, shared memory, warps, the block cap): the launch shape
    holding most kernel time among kernels whose blocks per SM that limit alone sets. A limit
    that sets no kernel's blocks gets the shape where it comes nearest (``how`` = ``nearest``,
    ``headroom`` = its block limit over the binding one). Columns: ``limit``, ``how`` (alone /
    nearest), ``kernel_class``, ``kernel`` (name, 40 characters), ``source``, the launch
    (threads, registers, shared memory bytes), the four block limits, ``headroom``,
    ``theoretical_occupancy_pct``, ``achieved_occupancy_pct`` (medians), ``kernels``,
    ``time_us``."""
    cols = list(LIMIT_COLUMNS.values())
    k = k.dropna(subset=cols + LAUNCH)
    low = k[cols].min(axis=1)
    rows = []
    for name, col in LIMIT_COLUMNS.items():
        others = k[[c for c in cols if c != col]].min(axis=1)
        alone = k[(k[col] == low) & (others > low)]
        how = "alone"
        if alone.empty:
            ratio = k[col] / low
            alone = k[ratio == ratio.min()]
            how = "nearest"
        g = alone.groupby(LAUNCH + ["kernel_class"])
        top = g.duration_us.sum().idxmax()
        sel = g.get_group(top)
        first = sel.sort_values("duration_us").iloc[-1]
        rows.append(
            {
                "limit": name,
                "how": how,
                "kernel_class": first.kernel_class,
                "kernel": str(first.kernel_name)[:40],
                "source": first.source,
                **{c: first[c] for c in LAUNCH},
                **{c: int(first[c]) for c in cols},
                "headroom": float(first[col] / min(first[c] for c in cols)),
                "theoretical_occupancy_pct": float(sel.theoretical_occupancy_pct.median()),
                "achieved_occupancy_pct": float(sel.achieved_occupancy_pct.median()),
                "kernels": len(sel),
                "time_us": float(sel.duration_us.sum()),
            }
        )
    return pd.DataFrame(rows)


def allocation_steps(launch: dict) -> pd.DataFrame:
    """The calculator's arithmetic for one ``launch`` (the keys of
    :func:`yolo_sm.topics.primer.analyse.flagship_launch`), step by step: warps per block, registers
    allocated per warp and per block (rounded to the allocation unit), the register file, the
    blocks it holds; shared memory requested, the reserved part added, rounded to the
    allocation unit, the carve-out the driver picks and the blocks it holds. Columns:
    ``step``, ``value``, ``unit``."""
    cc = launch["compute_capability"]
    threads, registers = launch["threads_per_block"], launch["registers_per_thread"]
    shared_mem = launch["shared_mem_per_block"]
    spec = ARCH[cc]
    r = theoretical_occupancy(cc, threads, registers, shared_mem)
    per_warp = r.registers_per_block_allocated // max(r.warps_per_block, 1)
    rows = [
        ("threads per block", threads, "threads"),
        ("warps per block (threads / 32, rounded up)", r.warps_per_block, "warps"),
        ("registers per thread", registers, "registers"),
        (f"registers per warp (x 32, rounded up to {spec.register_allocation_unit})", per_warp,
         "registers"),
        ("registers per block", r.registers_per_block_allocated, "registers"),
        ("register file per SM", spec.registers_per_sm, "registers"),
        ("blocks the registers allow", r.block_limit_registers, "blocks"),
        ("shared memory per block (static + dynamic)", shared_mem, "bytes"),
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
    """The shared-memory carve-outs (shared memory per SM; the rest of the SM's L1/shared
    storage stays L1 cache) the driver chose for the root's kernels: one row per selectable
    carve-out of compute capability ``cc``, with ``kernels`` launched at it, ``time_share`` of
    kernel time and the median shared memory per block of those kernels (bytes)."""
    spec = ARCH[cc]
    total = k.duration_us.sum()
    g = k.groupby("shared_mem_config_bytes")
    rows = []
    for c in spec.shared_mem_carveouts:
        sel = g.get_group(c) if c in g.groups else k.iloc[0:0]
        rows.append(
            {
                "carveout_bytes": c,
                "kernels": len(sel),
                "time_share": sel.duration_us.sum() / total if total else math.nan,
                "median_shared_mem_per_block_bytes": sel.shared_mem_per_block_bytes.median()
                if len(sel)
                else math.nan,
            }
        )
    return pd.DataFrame(rows)


def utilisation_curve(sm_count: int, active_blocks_per_sm: int = 1, max_waves: int = 3):
    """SM utilisation against grid size when every block takes as long: a grid of g blocks
    on ``sm_count`` SMs holding ``active_blocks_per_sm`` each runs ceil(g / slots) waves, and
    the slots busy over them are g / (waves x slots). Columns: ``grid_size``, ``waves``,
    ``utilisation_pct``."""
    slots = sm_count * active_blocks_per_sm
    g = pd.Series(range(1, max_waves * slots + 1))
    w = -(-g // slots)
    return pd.DataFrame({"grid_size": g, "waves": w, "utilisation_pct": 100 * g / (w * slots)})


def flagship_kernels(k: pd.DataFrame, launch: dict) -> pd.DataFrame:
    """The kernels launched with ``launch``'s shape (threads, registers, shared memory of a
    :func:`yolo_sm.topics.primer.analyse.flagship_launch`)."""
    return k[
        (k.block_size == launch["threads_per_block"])
        & (k.registers_per_thread == launch["registers_per_thread"])
        & (k.shared_mem_per_block_bytes == launch["shared_mem_per_block"])
    ]


def tail_example(flag: pd.DataFrame, sm_count: int) -> dict:
    """The grid size holding most of the flagship kernels' time, and what it does on
    ``sm_count`` SMs at one block per SM: ``grid_size``, ``idle_sms``, ``sm_coverage_pct``
    (:func:`yolo_sm.analyse.weighting.sm_coverage` of its waves, time-weighted, %), the
    kernels' time-weighted achieved and theoretical occupancy (%), and
    ``time_share`` of the flagship time at that grid."""
    by = flag.groupby("grid_size").duration_us.sum()
    grid = int(by.idxmax())
    sel = flag[flag.grid_size == grid]
    waves = sel.get("waves_per_sm", pd.Series(math.nan, index=sel.index))
    cov = pd.Series(sm_coverage(waves), index=sel.index)
    return {
        "grid_size": grid,
        "sm_count": sm_count,
        "idle_sms": max(sm_count - grid, 0) if grid <= sm_count else (-grid) % sm_count,
        # SM coverage as notebook 01 defines it (weighting.sm_coverage of ncu's waves)
        "sm_coverage_pct": 100 * weighted_mean(cov, sel.duration_us)
        if "waves_per_sm" in sel
        else 100 * grid / (math.ceil(grid / sm_count) * sm_count),
        "achieved_occupancy_tw_pct": weighted_mean(sel.achieved_occupancy_pct, sel.duration_us),
        "theoretical_occupancy_tw_pct": weighted_mean(
            sel.theoretical_occupancy_pct, sel.duration_us
        ),
        "time_share": float(by.max() / by.sum()),
    }


def hopper_mechanism(flag: pd.DataFrame, cc: str, sm_count: int, pipe: pd.DataFrame | None):
    """The flagship launch's numbers behind the one-block-per-SM design, one row each:
    warpgroups per block, register file share, shared memory per block against the opt-in
    maximum, blocks per SM, the largest grid against the SM count and the share of launches
    at most one wave, time-weighted achieved occupancy, and (from ``pipe``, a full-metric
    table) the tensor-pipe use of the same launch shape. Columns: ``quantity``, ``value``,
    ``unit``, ``what it means``."""
    spec = ARCH[cc]
    f = flag.iloc[0]
    threads, regs = int(f.block_size), int(f.registers_per_thread)
    smem = int(f.shared_mem_per_block_bytes)
    r = theoretical_occupancy(cc, threads, regs, smem)
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
        ("achieved occupancy (time-weighted)",
         weighted_mean(flag.achieved_occupancy_pct, flag.duration_us), "%",
         "few warps resident: latency is hidden by asynchronous copies and instruction-level "
         "parallelism, not by switching between many warps"),
    ]  # fmt: skip
    if pipe is not None and len(pipe):
        p = pipe[(pipe.block_size == threads) & (pipe.registers_per_thread == regs)]
        if len(p) and "tensor_pipe_pct" in p:
            rows.append(
                ("tensor pipe active (time-weighted)",
                 weighted_mean(p.tensor_pipe_pct, p.duration_us), "%",
                 f"the same launch shape in {PIPE_TABLE}: the tensor cores stay busy at "
                 f"{weighted_mean(p.achieved_occupancy_pct, p.duration_us):.1f} % achieved "
                 "occupancy")
            )  # fmt: skip
    return pd.DataFrame(rows, columns=["quantity", "value", "unit", "what it means"])


def simt_contrast(ncu: pd.DataFrame) -> pd.DataFrame:
    """Per config of a precision table (``ncu_precision_w1``): GPU time of its convolutions
    per forward, split into SIMT and tensor-core convolutions, with their time-weighted
    achieved occupancy, and ``conv_ms`` relative to the fastest config's (``x_fastest``).
    Columns: ``config``, ``conv_class`` (the class holding most conv time), ``conv_ms``,
    ``achieved_occupancy_tw_pct``, ``x_fastest``."""
    k = add_kernel_class(ncu)
    conv = k[k.kernel_class.isin(["simt_conv", "tensor_core_conv"])]
    rows = []
    for cfg, g in conv.groupby("config"):
        main = g.groupby("kernel_class").duration_us.sum().idxmax()
        rows.append(
            {
                "config": cfg,
                "conv_class": main,
                "conv_ms": g.duration_us.sum() / 1e3,
                "achieved_occupancy_tw_pct": weighted_mean(g.achieved_occupancy_pct, g.duration_us),
            }
        )
    out = pd.DataFrame(rows).sort_values("conv_ms", ignore_index=True)
    out["x_fastest"] = out.conv_ms / out.conv_ms.min()
    return out


def simt_vs_tensor(contrast: pd.DataFrame) -> dict:
    """The slowest SIMT-conv config against the fastest tensor-core one of
    :func:`simt_contrast`: their configs, ``time_ratio`` (SIMT conv ms / tensor-core conv ms)
    and each one's achieved occupancy (%); empty when either class is absent."""
    s = contrast[contrast.conv_class == "simt_conv"]
    t = contrast[contrast.conv_class == "tensor_core_conv"]
    if s.empty or t.empty:
        return {}
    slow, fast = s.iloc[-1], t.iloc[0]
    return {
        "simt_config": slow.config,
        "tensor_config": fast.config,
        "time_ratio": slow.conv_ms / fast.conv_ms,
        "simt_achieved_occupancy_pct": slow.achieved_occupancy_tw_pct,
        "tensor_achieved_occupancy_pct": fast.achieved_occupancy_tw_pct,
    }


def block_cap_what_if(example: pd.Series, cc: str, threads: int = 32) -> pd.DataFrame:
    """The block-cap lesson on a real kernel: ``example`` (a row of :func:`limit_examples`)
    launched with ``threads`` per block instead, its registers and shared memory unchanged.
    :func:`yolo_sm.analyse.occupancy.limits_table` of both launches, side by side: columns
    ``limit``, ``as launched`` and ``with {threads} threads`` (blocks per SM each limit
    allows), and the theoretical occupancy as the last row."""
    regs, smem = int(example.registers_per_thread), int(example.shared_mem_per_block_bytes)
    out = {}
    for label, t in (
        ("as launched", int(example.block_size)),
        (f"with {threads} threads", threads),
    ):
        r = theoretical_occupancy(cc, t, regs, smem)
        lt = limits_table(r).set_index("limit").blocks_per_sm
        out[label] = [*lt.tolist(), r.occupancy_pct]
    index = [*limits_table(theoretical_occupancy(cc, threads, regs, smem)).limit, "occupancy %"]
    return pd.DataFrame(out, index=index).rename_axis("limit").reset_index()

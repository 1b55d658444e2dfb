"""Notebook 00 (occupancy primer): waves and tails, low-occupancy tensor-core kernels that keep the
tensor pipes busy, and Kineto's estimate next to Nsight Compute's measurement."""

from __future__ import annotations

from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import tail_fraction, waves
from yolo_sm.analyse.weighting import sm_coverage, weighted_mean


def wave_table(grid_sizes, active_blocks_per_sm: int = 1, sm_count: int = 132):
    """For each grid size: waves, blocks in the last wave, ``tail_fraction`` (how full a last,
    partial wave is: 0 when the grid fills whole waves, so there is no tail), and the share of
    SM slots busy over the kernel (if every block takes as long)."""
    import pandas as pd

    rows = []
    for g in grid_sizes:
        w = waves(g, active_blocks_per_sm, sm_count)
        slots = active_blocks_per_sm * sm_count
        rows.append(
            {
                "grid_size": g,
                "waves": w,
                "blocks_in_last_wave": g - (int(-(-g // slots)) - 1) * slots,
                "tail_fraction": tail_fraction(g, active_blocks_per_sm, sm_count),
                "sm_slots_busy": sm_coverage(w),
            }
        )
    return pd.DataFrame(rows)


def tensor_core_occupancy_levels(ncu):
    """Share of tensor-core convolution time at each theoretical occupancy level, with the
    launch shape (threads per block, registers per thread) that holds most of it."""
    k = add_kernel_class(ncu)
    tc = k[k.kernel_class == "tensor_core_conv"].copy()
    tc["theoretical_occupancy_pct"] = tc.theoretical_occupancy_pct.round(2)
    g = tc.groupby("theoretical_occupancy_pct")
    out = g.agg(
        time_us=("duration_us", "sum"),
        kernels=("duration_us", "size"),
        block_size=("block_size", lambda s: s.mode().iloc[0]),
        registers_per_thread=("registers_per_thread", lambda s: s.mode().iloc[0]),
    ).reset_index()
    out["time_share"] = out.time_us / out.time_us.sum()
    return out.sort_values("time_share", ascending=False, ignore_index=True)


def pipe_vs_occupancy(ncu):
    """Per kernel of a full-set capture: achieved occupancy, tensor-pipe and SM throughput, the
    kernel class and its time, for the scatter that shows occupancy is not efficiency."""
    k = add_kernel_class(ncu)
    cols = [
        "config",
        "kernel_name",
        "kernel_class",
        "duration_us",
        "theoretical_occupancy_pct",
        "achieved_occupancy_pct",
        "tensor_pipe_pct",
        "sm_throughput_pct",
        "dram_throughput_pct",
        "block_size",
        "registers_per_thread",
    ]
    return k[[c for c in cols if c in k]].copy()


def time_weighted(df, col: str, weight: str = "duration_us") -> float:
    """``col`` averaged over all of ``df`` with kernel time as the weight."""

    return weighted_mean(df[col], df[weight])

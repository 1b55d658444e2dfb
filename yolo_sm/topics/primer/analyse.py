"""Occupancy primer (notebook 00): the calculator on the launch that holds most tensor-core
convolution time, waves and tails, low-occupancy tensor-core kernels that keep the tensor pipes
busy. The calculator's and Kineto's checks are :mod:`yolo_sm.topics.primer.checks`, the
lessons on real kernels :mod:`yolo_sm.topics.primer.kernels` and
:mod:`yolo_sm.topics.primer.questions`.

:func:`facts` reads a dataset root and returns the numbers the primer's rules
(:mod:`yolo_sm.topics.primer.rules`) judge; a dataset the root lacks leaves its facts out.
"""

from __future__ import annotations

import math

import pandas as pd

from yolo_sm.analyse.facts import fact, facts_table
from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.occupancy import OccupancyResult, tail_fraction, theoretical_occupancy
from yolo_sm.analyse.occupancy import waves as waves_of
from yolo_sm.analyse.weighting import sm_coverage
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.contract.labels import parse_config
from yolo_sm.topics.primer.checks import (
    calculator_facts,
    compute_capability,
    time_weighted,
)
from yolo_sm.topics.primer.questions import facts_rows as lesson_facts

#: The primer's datasets: per-kernel Nsight Compute launch statistics of the width forwards,
#: the full metric set (tensor pipe) of the wide conv stack, the PyTorch profiler trace of the
#: width forwards and the per-layer join of Kineto and Nsight Compute.
NCU = "ncu_width_b8"
WIDE = "ncu_wide_stack"
TRACE = "trace_width_b8"
LAYERS = "profile_layers"
#: Every Nsight Compute table the calculator is checked against (those the root holds).
NCU_TABLES = ("ncu_width_b8", "ncu_batch_w1", "ncu_precision_w1", "ncu_wide_stack", "ncu_resnet101")
#: Kernel classes that move data rather than multiply matrices.
MEMORY_CLASSES = ("elementwise", "copy_concat", "pooling_upsample")
#: The rule of thumb's line: "below 60 % occupancy wastes the GPU" (achieved occupancy, %).
LOW_OCCUPANCY_PCT = 60.0
#: The calculator's example when a root has no Nsight Compute table: a Hopper SM and a
#: plain 256-thread block.
EXAMPLE_LAUNCH = {
    "compute_capability": "9.0",
    "threads_per_block": 256,
    "registers_per_thread": 32,
    "shared_mem_per_block": 0,
}
LAUNCH_COLUMNS = ["block_size", "registers_per_thread", "shared_mem_per_block_bytes"]


def sm_count(root: DataRoot, ncu: pd.DataFrame | None = None) -> int | None:
    """The GPU's SM count from the root's provenance, else from the ``prov_sm_count`` of the
    ``ncu`` rows (default: the root's :data:`NCU` table); None when neither names one."""
    v = root.machine().get("sm_count", "")
    if not v and ncu is None and root.has(NCU):
        ncu = root.load(NCU)
    if not v and ncu is not None and "prov_sm_count" in ncu:
        s = pd.to_numeric(ncu.prov_sm_count, errors="coerce").dropna()
        v = s.iloc[0] if len(s) else ""
    try:
        return int(float(str(v).split(", ")[0]))
    except ValueError:
        return None


def launch_shapes(ncu: pd.DataFrame, kernel_class: str = "tensor_core_conv") -> pd.DataFrame:
    """Kernel time per launch shape (threads per block, registers per thread, shared memory
    per block in bytes) of one kernel class: ``time_us``, ``time_share`` of the class's time,
    ``kernels``, Nsight Compute's ``theoretical_occupancy_pct`` and block limits (registers,
    shared memory), most time first."""
    k = add_kernel_class(ncu)
    k = k[k.kernel_class == kernel_class]
    out = (
        k.groupby(LAUNCH_COLUMNS)
        .agg(
            time_us=("duration_us", "sum"),
            kernels=("duration_us", "size"),
            theoretical_occupancy_pct=("theoretical_occupancy_pct", "median"),
            limit_registers=("limit_registers", "median"),
            limit_shared_mem=("limit_shared_mem", "median"),
        )
        .reset_index()
    )
    out["time_share"] = out.time_us / out.time_us.sum()
    return out.sort_values("time_us", ascending=False, ignore_index=True)


def flagship_launch(root: DataRoot, name: str = NCU) -> dict:
    """The launch to put in the calculator: the shape holding most tensor-core convolution
    time in ``root``'s Nsight Compute table ``name`` (its compute capability from provenance),
    or :data:`EXAMPLE_LAUNCH` when the root has no such table. Keys: the calculator's
    arguments (``compute_capability``, ``threads_per_block``, ``registers_per_thread``,
    ``shared_mem_per_block`` in bytes), then ``source`` (dataset name or ``"example"``),
    ``time_share`` (of tensor-core convolution time), Nsight Compute's
    ``ncu_theoretical_occupancy_pct``, ``ncu_limit_registers`` and ``ncu_limit_shared_mem``
    (NaN for the example)."""
    nan = math.nan
    extra = {
        "source": "example",
        "time_share": nan,
        "ncu_theoretical_occupancy_pct": nan,
        "ncu_limit_registers": nan,
        "ncu_limit_shared_mem": nan,
    }
    if not root.has(name):
        return {**EXAMPLE_LAUNCH, **extra}
    ncu = root.load(name)
    shapes = launch_shapes(ncu)
    if shapes.empty:
        return {**EXAMPLE_LAUNCH, **extra}
    top = shapes.iloc[0]
    return {
        "compute_capability": compute_capability(root, ncu) or EXAMPLE_LAUNCH["compute_capability"],
        "threads_per_block": int(top.block_size),
        "registers_per_thread": int(top.registers_per_thread),
        "shared_mem_per_block": int(top.shared_mem_per_block_bytes),
        "source": name,
        "time_share": float(top.time_share),
        "ncu_theoretical_occupancy_pct": float(top.theoretical_occupancy_pct),
        "ncu_limit_registers": float(top.limit_registers),
        "ncu_limit_shared_mem": float(top.limit_shared_mem),
    }


def calculate(launch: dict) -> OccupancyResult:
    """:func:`yolo_sm.analyse.occupancy.theoretical_occupancy` of a :func:`flagship_launch`."""
    return theoretical_occupancy(
        launch["compute_capability"],
        launch["threads_per_block"],
        launch["registers_per_thread"],
        launch["shared_mem_per_block"],
    )


def wave_table(grid_sizes, *, active_blocks_per_sm: int = 1, sm_count: int):
    """For each grid size: waves, blocks in the last wave, ``tail_fraction`` (how full a last,
    partial wave is: 0 when the grid fills whole waves, so there is no tail), and the share of
    SM slots busy over the kernel (if every block takes as long)."""
    rows = []
    for g in grid_sizes:
        w = waves_of(g, active_blocks_per_sm, sm_count)
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


def example_grids(sm_count: int) -> list[int]:
    """Grid sizes that show waves and tails on a GPU of ``sm_count`` SMs (one block per SM):
    half a wave, one wave, one block more, 1.5 waves, two waves, 2.3 waves, ten waves."""
    n = int(sm_count)
    return [n // 2, n, n + 1, n * 3 // 2, 2 * n, n * 23 // 10, 10 * n]


def focus_config(ncu: pd.DataFrame) -> str:
    """The forward to look at closely: the config of width 1.0 (else the nearest width; a
    table without config labels of widths: the config with most kernel time)."""
    configs = list(dict.fromkeys(ncu.config))
    widths = {}
    for c in configs:
        try:
            widths[c] = parse_config(c)["width"]
        except ValueError:
            continue
    if widths:
        return min(widths, key=lambda c: (abs(widths[c] - 1.0), widths[c]))
    return str(ncu.groupby("config").duration_us.sum().idxmax())


def forward(ncu: pd.DataFrame, config: str | None = None) -> pd.DataFrame:
    """The kernels of one forward (``config``, default :func:`focus_config`) with their kernel
    class (:func:`yolo_sm.analyse.kernels.add_kernel_class`)."""
    config = focus_config(ncu) if config is None else config
    return add_kernel_class(ncu[ncu.config == config])


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


def _forward_facts(ncu: pd.DataFrame) -> list[dict]:
    cfg = focus_config(ncu)
    k = add_kernel_class(ncu[ncu.config == cfg])
    tc = k[k.kernel_class == "tensor_core_conv"]
    mem = k[k.kernel_class.isin(MEMORY_CLASSES)]
    ds = (NCU,)
    note = f"forward {cfg}"
    low = tc.achieved_occupancy_pct < LOW_OCCUPANCY_PCT
    tc_ach = time_weighted(tc, "achieved_occupancy_pct") if len(tc) else math.nan
    mem_ach = time_weighted(mem, "achieved_occupancy_pct") if len(mem) else math.nan
    return [
        fact(
            "tc_conv_time_share_below_60_achieved",
            100 * tc.duration_us[low].sum() / tc.duration_us.sum() if len(tc) else math.nan,
            "%",
            datasets=ds,
            note=f"{note}; share of tensor-core convolution time",
        ),
        fact(
            "memory_minus_tc_conv_achieved_occupancy_pct_points",
            mem_ach - tc_ach,
            "points",
            datasets=ds,
            note=note,
        ),
    ]


def _flagship_facts(root: DataRoot) -> list[dict]:
    res = calculate(flagship_launch(root))
    resources = [n for n in res.binding_limits if n in ("registers", "shared_mem")]
    return [
        fact(
            "flagship_binding_resource_limits",
            len(resources),
            "limits",
            datasets=(NCU,),
            note="registers and shared memory: how many cap the active blocks",
        ),
    ]


#: the facts :func:`facts` computes that a rule reads (a rule naming another fails to load)
FACT_KEYS = frozenset(
    """
    calculator_mismatch_share flagship_binding_resource_limits
    flagship_grid_at_most_sm_count_share
    memory_minus_tc_conv_achieved_occupancy_pct_points simt_over_tensor_conv_time_ratio
    simt_tensor_conv_achieved_occupancy_gap_pct_points tc_conv_time_share_below_60_achieved
    """.split()
)


def facts(root: DataRoot) -> pd.DataFrame:
    """The primer's facts from ``root`` (:mod:`yolo_sm.analyse.facts`), scope empty:

    - from ``ncu_width_b8``, the forward of :func:`focus_config`:
      ``tc_conv_time_share_below_60_achieved``,
      ``memory_minus_tc_conv_achieved_occupancy_pct_points``; the :func:`flagship_launch` in the
      calculator: ``flagship_binding_resource_limits`` (how many of registers and shared memory
      cap its active blocks);
    - the Hopper lessons of :func:`yolo_sm.topics.primer.questions.facts_rows`
      (``flagship_grid_at_most_sm_count_share``, ``simt_over_tensor_conv_time_ratio``,
      ``simt_tensor_conv_achieved_occupancy_gap_pct_points``);
    - from every Nsight Compute table: ``calculator_mismatch_share``.

    Kineto's estimate is the calculator's value capped by the grid (never above it by
    definition): :func:`yolo_sm.topics.primer.checks.kineto_summary` shows it as a table.
    """
    rows = []
    if root.has(NCU):
        ncu = root.load(NCU)
        rows += _forward_facts(ncu) + _flagship_facts(root)
        rows += lesson_facts(root, flagship_launch(root), sm_count(root, ncu))
    elif root.has("ncu_precision_w1"):
        rows += lesson_facts(root, flagship_launch(root), sm_count(root))
    rows += calculator_facts(root, NCU_TABLES)
    return facts_table(rows)

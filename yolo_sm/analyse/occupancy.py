"""Theoretical SM occupancy of a CUDA kernel launch, in pure Python.

Reproduces ``cudaOccMaxActiveBlocksPerMultiprocessor`` from the CUDA toolkit's
``cuda_occupancy.h`` (CUDA 12.6), which is what Nsight Compute's theoretical occupancy
(``sm__maximum_warps_per_active_cycle_pct``) and its ``launch__occupancy_limit_*`` block
limits report. Hardware numbers come from the CUDA Programming Guide, "Compute Capabilities"
(Tables 30-32), and from ``cuda_occupancy.h`` for the allocation granularities.

Units: threads, warps and blocks are counts; registers are 32-bit registers; shared memory
is in bytes (1 KiB = 1024 bytes); occupancy is a percentage (0-100) of the SM's warp slots.

"Block limit" values are blocks per SM. A resource that does not constrain the launch at
all (0 registers per thread; 0 bytes of shared memory on CC < 8.0, where no shared memory
is reserved per block) reports ``max_blocks_per_sm`` instead of cudaOcc's INT_MAX.
"""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from yolo_sm.contract.errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

KIB = 1024
#: Order used to name the limiter when several block limits tie for the minimum: the
#: hardware caps first (changing the kernel's registers or shared memory cannot lift them),
#: then registers, then shared memory (whose limit at the driver-chosen carveout is tight by
#: construction). So a 100 % launch is "warps", and a 1-warp kernel capped at 32 blocks is
#: "blocks" even when its registers would also allow exactly 32 blocks.
LIMITER_ORDER = ("warps", "blocks", "registers", "shared_mem")
#: Nsight Compute's block-limit column of each limit
LIMIT_COLUMNS = {n: f"limit_{n}" for n in LIMITER_ORDER}
#: the limits a kernel's own resources set (the others are the SM's warp and block slots)
RESOURCES = ("registers", "shared_mem")


@dataclass(frozen=True)
class ArchSpec:
    """Per-SM limits of one compute capability. Memory sizes in bytes, registers in 32-bit
    registers."""

    compute_capability: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_shared_mem_per_sm: int  #: largest shared-memory carveout (bytes)
    max_shared_mem_per_block: int  #: opt-in maximum per block, excluding the reserved part
    shared_mem_allocation_unit: int  #: bytes; a block's shared memory is rounded up to this
    reserved_shared_mem_per_block: int  #: bytes the driver adds to every block (CC >= 8.0)
    shared_mem_carveouts: tuple[int, ...]  #: selectable shared-memory sizes per SM (bytes)
    max_threads_per_block: int = 1024
    warp_size: int = 32
    registers_per_sm: int = 65536
    max_registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256  #: registers; per-warp allocation is rounded to this
    register_allocation_granularity: str = "warp"
    register_sub_partitions: int = 4  #: register file split; warps per SM are a multiple

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * self.warp_size


def _kib(*sizes: int) -> tuple[int, ...]:
    return tuple(s * KIB for s in sizes)


_VOLTA = _kib(0, 8, 16, 32, 64, 96)
_GA100 = _kib(0, 8, 16, 32, 64, 100, 132, 164)
_GA10X = _kib(0, 8, 16, 32, 64, 100)
_HOPPER = _kib(0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
#: (max warps/SM, max blocks/SM, smem/SM KiB, smem/block KiB, alloc unit B, reserved B, carveouts)
_TABLE = {
    "7.0": (64, 32, 96, 96, 256, 0, _VOLTA),
    "7.2": (64, 32, 96, 96, 256, 0, _VOLTA),
    "7.5": (32, 16, 64, 64, 256, 0, _kib(32, 64)),
    "8.0": (64, 32, 164, 163, 128, KIB, _GA100),
    "8.6": (48, 16, 100, 99, 128, KIB, _GA10X),
    "8.7": (48, 16, 164, 163, 128, KIB, _GA100),
    "8.9": (48, 24, 100, 99, 128, KIB, _GA10X),
    "9.0": (64, 32, 228, 227, 128, KIB, _HOPPER),
    "10.0": (64, 32, 228, 227, 128, KIB, _HOPPER),
    "10.3": (64, 32, 228, 227, 128, KIB, _HOPPER),
    "11.0": (48, 24, 228, 227, 128, KIB, _HOPPER),
    "12.0": (48, 24, 100, 99, 128, KIB, _GA10X),
    "12.1": (48, 24, 100, 99, 128, KIB, _GA10X),
}
ARCH: dict[str, ArchSpec] = {
    cc: ArchSpec(cc, w, b, sm * KIB, blk * KIB, unit, res, carve)
    for cc, (w, b, sm, blk, unit, res, carve) in _TABLE.items()
}


@dataclass(frozen=True)
class OccupancyResult:
    """Theoretical occupancy of one launch configuration on one SM (see module docstring)."""

    compute_capability: str
    threads_per_block: int
    registers_per_thread: int
    shared_mem_per_block: int  #: requested bytes (static + dynamic)
    occupancy_pct: float  #: active warps / max warps per SM * 100
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    block_limit_registers: int
    block_limit_shared_mem: int  #: at ``shared_mem_config_bytes``
    block_limit_warps: int
    block_limit_blocks: int
    limiter: str  #: "registers" | "shared_mem" | "warps" | "blocks" (ties: LIMITER_ORDER)
    warps_per_block: int
    registers_per_block_allocated: int
    shared_mem_per_block_allocated: int  #: bytes, incl. reserved, rounded to the alloc unit
    shared_mem_config_bytes: int  #: shared-memory carveout per SM used (bytes)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def block_limits(self) -> dict[str, int]:
        """Blocks per SM each of the four limits allows, in :data:`LIMITER_ORDER`."""
        return {
            "warps": self.block_limit_warps,
            "blocks": self.block_limit_blocks,
            "registers": self.block_limit_registers,
            "shared_mem": self.block_limit_shared_mem,
        }

    @property
    def binding_limits(self) -> tuple[str, ...]:
        """Every limit that allows no more than the active blocks (``limiter`` names only the
        first of them in :data:`LIMITER_ORDER`): ``("registers", "shared_mem")`` when both
        cap the launch at the same number of blocks."""
        return tuple(n for n, v in self.block_limits.items() if v == self.active_blocks_per_sm)


def limits_table(result: OccupancyResult) -> pd.DataFrame:
    """One row per limit of ``result``: ``limit`` (warps, blocks, registers, shared_mem),
    ``blocks_per_sm`` it allows, ``binding`` (whether it sets the active blocks)."""
    import pandas as pd

    return pd.DataFrame(
        {
            "limit": list(result.block_limits),
            "blocks_per_sm": list(result.block_limits.values()),
            "binding": [n in result.binding_limits for n in result.block_limits],
        }
    )


def _arch(compute_capability: str) -> ArchSpec:
    spec = ARCH.get(compute_capability.strip()) if isinstance(compute_capability, str) else None
    if spec is None:
        raise UserError(
            f"Unsupported compute capability {compute_capability!r}; supported: {', '.join(ARCH)}."
        )
    return spec


def _int(name: str, value, lo: int, hi: int, unit: str) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        v = None
    if v is None or isinstance(value, bool):
        raise UserError(f"{name} must be an integer, got {value!r}.")
    if not lo <= v <= hi:
        raise UserError(f"{name} must be between {lo} and {hi} {unit}, got {v}.")
    return v


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _register_limit(spec: ArchSpec, regs: int, warps: int) -> tuple[int, int]:
    """(blocks per SM allowed by registers, registers allocated per block), as
    cudaOccMaxBlocksPerSMRegsLimit: per-warp allocation rounded to the allocation unit, each
    of the sub-partitions holds a whole number of warps."""
    per_warp = _round_up(regs * spec.warp_size, spec.register_allocation_unit)
    per_block = per_warp * warps
    if per_warp == 0:
        return spec.max_blocks_per_sm, 0
    hw_check = per_warp * _round_up(warps, spec.register_sub_partitions)
    if max(hw_check, per_block) > spec.max_registers_per_block:
        return 0, per_block
    per_sub = spec.registers_per_sm // spec.register_sub_partitions
    warps_per_sm = (per_sub // per_warp) * spec.register_sub_partitions
    return warps_per_sm // warps, per_block


def _align_carveout(spec: ArchSpec, nbytes: int) -> int:
    """Smallest selectable carveout >= nbytes (cudaOccAlignUpShmemSizeVoltaPlus)."""
    for size in spec.shared_mem_carveouts:
        if size >= nbytes:
            return size
    raise UserError(
        f"shared memory carveout must be at most {spec.max_shared_mem_per_sm} bytes on "
        f"CC {spec.compute_capability}, got {nbytes}."
    )


def _smem_limit(alloc: int, carveout: int, spec: ArchSpec) -> int:
    return carveout // alloc if alloc else spec.max_blocks_per_sm


def theoretical_occupancy(
    compute_capability: str,
    threads_per_block: int,
    registers_per_thread: int,
    shared_mem_per_block: int,
    *,
    shared_mem_carveout: int | None = None,
) -> OccupancyResult:
    """Theoretical occupancy of a launch on one SM.

    ``registers_per_thread`` is the kernel's register count (0: no register limit);
    ``shared_mem_per_block`` is static + dynamic shared memory in bytes, without the 1 KiB
    the driver reserves per block on CC >= 8.0 (added here). ``shared_mem_carveout`` is the
    shared-memory size per SM in bytes; it is rounded up to the next selectable carveout,
    and, as in cudaOcc, a carveout too small for one block is replaced by the smallest one
    that fits it. ``None`` picks what the driver picks: the smallest carveout that reaches
    the highest number of active blocks (that of the largest carveout). A launch that cannot
    run at all (too many registers per block) gives 0 active blocks, limited by registers.
    Raises UserError (a ValueError) for an unknown compute capability or an argument that is
    not an integer in range.
    """
    spec = _arch(compute_capability)
    threads = _int("threads_per_block", threads_per_block, 1, spec.max_threads_per_block, "threads")
    regs = _int(
        "registers_per_thread", registers_per_thread, 0, spec.max_registers_per_thread, "registers"
    )
    smem = _int(
        "shared_mem_per_block", shared_mem_per_block, 0, spec.max_shared_mem_per_block, "bytes"
    )
    warps = -(-threads // spec.warp_size)
    limit_warps = spec.max_warps_per_sm // warps
    limit_blocks = spec.max_blocks_per_sm
    limit_regs, regs_alloc = _register_limit(spec, regs, warps)
    alloc = _round_up(smem + spec.reserved_shared_mem_per_block, spec.shared_mem_allocation_unit)
    others = min(limit_warps, limit_blocks, limit_regs)

    if shared_mem_carveout is not None:
        carve = _int(
            "shared_mem_carveout", shared_mem_carveout, 0, spec.max_shared_mem_per_sm, "bytes"
        )
        config = _align_carveout(spec, max(carve, alloc))
    else:
        best = min(others, _smem_limit(alloc, spec.max_shared_mem_per_sm, spec))
        config = next(
            c
            for c in spec.shared_mem_carveouts
            if c >= alloc and min(others, _smem_limit(alloc, c, spec)) == best
        )
    limit_smem = _smem_limit(alloc, config, spec)

    limits = {
        "warps": limit_warps,
        "blocks": limit_blocks,
        "registers": limit_regs,
        "shared_mem": limit_smem,
    }
    active = min(limits.values())
    limiter = next(name for name in LIMITER_ORDER if limits[name] == active)
    return OccupancyResult(
        compute_capability=spec.compute_capability,
        threads_per_block=threads,
        registers_per_thread=regs,
        shared_mem_per_block=smem,
        occupancy_pct=100.0 * active * warps / spec.max_warps_per_sm,
        active_blocks_per_sm=active,
        active_warps_per_sm=active * warps,
        max_warps_per_sm=spec.max_warps_per_sm,
        block_limit_registers=limit_regs,
        block_limit_shared_mem=limit_smem,
        block_limit_warps=limit_warps,
        block_limit_blocks=limit_blocks,
        limiter=limiter,
        warps_per_block=warps,
        registers_per_block_allocated=regs_alloc,
        shared_mem_per_block_allocated=alloc,
        shared_mem_config_bytes=config,
    )


VARY = ("threads_per_block", "registers_per_thread", "shared_mem_per_block")


def _default_values(spec: ArchSpec, vary: str, base: dict) -> list[int]:
    if vary == "threads_per_block":
        return list(range(spec.warp_size, spec.max_threads_per_block + 1, spec.warp_size))
    if vary == "shared_mem_per_block":
        top = spec.max_shared_mem_per_block
        return sorted({*range(0, top + 1, KIB), top, base[vary]})
    # registers: every 8, plus both sides of every step of the register block limit
    top = spec.max_registers_per_thread
    warps = -(-base["threads_per_block"] // spec.warp_size)
    lim = [_register_limit(spec, r, warps)[0] for r in range(top + 1)]
    steps = {r for r in range(1, top) if lim[r] != lim[r + 1]}
    return sorted({*range(0, top + 1, 8), top, base[vary], *steps, *(r + 1 for r in steps)})


def occupancy_curve(
    compute_capability: str,
    *,
    vary: str,
    threads_per_block: int,
    registers_per_thread: int,
    shared_mem_per_block: int,
    values=None,
    shared_mem_carveout: int | None = None,
) -> pd.DataFrame:
    """What-if curve, like Nsight Compute's occupancy graphs: occupancy while one of
    ``threads_per_block`` (threads), ``registers_per_thread`` (registers) or
    ``shared_mem_per_block`` (bytes) takes each of ``values`` and the others stay fixed.

    Default values: block sizes 32..1024 step 32; registers 0..255 every 8 plus both sides
    of every step in the register limit, and the current value; shared memory 0..max per
    block every 1 KiB plus the maximum and the current value. One row per value, columns
    ``value``, the varied parameter's name (same number), ``occupancy_pct``,
    ``active_blocks_per_sm``, ``active_warps_per_sm``, ``limiter`` and the four
    ``block_limit_*`` columns.
    """
    import pandas as pd

    if vary not in VARY:
        raise UserError(f"vary must be one of {', '.join(VARY)}, got {vary!r}.")
    spec = _arch(compute_capability)
    base = {
        "threads_per_block": threads_per_block,
        "registers_per_thread": registers_per_thread,
        "shared_mem_per_block": shared_mem_per_block,
    }
    if values is None:
        values = _default_values(spec, vary, base)
    rows = []
    for v in values:
        r = theoretical_occupancy(
            spec.compute_capability, **{**base, vary: v}, shared_mem_carveout=shared_mem_carveout
        )
        rows.append(
            {
                "value": int(v),
                vary: int(v),
                "occupancy_pct": r.occupancy_pct,
                "active_blocks_per_sm": r.active_blocks_per_sm,
                "active_warps_per_sm": r.active_warps_per_sm,
                "limiter": r.limiter,
                "block_limit_registers": r.block_limit_registers,
                "block_limit_shared_mem": r.block_limit_shared_mem,
                "block_limit_warps": r.block_limit_warps,
                "block_limit_blocks": r.block_limit_blocks,
            }
        )
    columns = [
        "value",
        vary,
        "occupancy_pct",
        "active_blocks_per_sm",
        "active_warps_per_sm",
        "limiter",
        "block_limit_registers",
        "block_limit_shared_mem",
        "block_limit_warps",
        "block_limit_blocks",
    ]
    return pd.DataFrame(rows, columns=columns)


def _wave_args(grid_size: int, active_blocks_per_sm: int, sm_count: int) -> tuple[int, int]:
    grid = _int("grid_size", grid_size, 1, 2**63, "blocks")
    per_sm = _int("active_blocks_per_sm", active_blocks_per_sm, 1, 2**31, "blocks")
    sms = _int("sm_count", sm_count, 1, 2**31, "SMs")
    return grid, per_sm * sms


def waves(grid_size: int, active_blocks_per_sm: int, sm_count: int) -> float:
    """Number of waves: grid blocks / (active blocks per SM * SMs); 2.5 means two full
    waves and a half-full third one."""
    grid, per_wave = _wave_args(grid_size, active_blocks_per_sm, sm_count)
    return grid / per_wave


def tail_fraction(grid_size: int, active_blocks_per_sm: int, sm_count: int) -> float:
    """How full the last, partial wave is, as a fraction of a whole wave in [0, 1): the
    fractional part of :func:`waves`. 0.0 means the grid fills a whole number of waves (no
    tail); 0.1 means the last wave keeps only a tenth of the block slots busy."""
    grid, per_wave = _wave_args(grid_size, active_blocks_per_sm, sm_count)
    return (grid % per_wave) / per_wave


def binding(ncu: pd.DataFrame) -> pd.DataFrame:
    """Per row of an Nsight Compute table: one boolean column per limit (:data:`LIMITER_ORDER`),
    True where that ``limit_*`` equals the row's smallest block limit (ties: several True)."""
    lim = ncu[list(LIMIT_COLUMNS.values())].set_axis(list(LIMIT_COLUMNS), axis=1)
    return lim.eq(lim.min(axis=1), axis=0)


def block_limiter(ncu: pd.DataFrame) -> pd.Series:
    """Per row of an Nsight Compute table: the limit that sets its active blocks per SM, named
    as the calculator's ``limiter`` (first binding limit in :data:`LIMITER_ORDER`). So a kernel
    counts as capped by a resource (:data:`RESOURCES`) only where registers or shared memory
    allow fewer blocks than both the warp and the block slots."""
    return binding(ncu).idxmax(axis=1)


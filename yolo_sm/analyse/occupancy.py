"""Theoretical occupancy (% of an SM's warp slots) as CUDA 12.6's occupancy calculator; limits
in blocks per SM (a resource that does not constrain reports ``max_blocks_per_sm``)."""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from yolo_sm.contract.errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

KIB = 1024
#: Which limiter a tie names: the hardware caps first (the kernel cannot lift them), then
#: registers, then shared memory (tight by construction at the driver-chosen carveout).
LIMITER_ORDER = ("warps", "blocks", "registers", "shared_mem")
#: Nsight Compute's block-limit column of each limit
LIMIT_COLUMNS = {n: f"limit_{n}" for n in LIMITER_ORDER}
#: the limits a kernel's own resources set (the others are the SM's warp and block slots)
RESOURCES = ("registers", "shared_mem")


@dataclass(frozen=True)
class ArchSpec:
    """Per-SM limits of one compute capability (bytes, 32-bit registers)."""

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
    register_sub_partitions: int = 4  #: register file split; warps per SM are a multiple


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
    """Theoretical occupancy of one launch on one SM."""

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
        """Every limit that allows no more than the active blocks (``limiter``: the first)."""
        return tuple(n for n, v in self.block_limits.items() if v == self.active_blocks_per_sm)


def limits_table(result: OccupancyResult) -> pd.DataFrame:
    """One row per limit: ``limit``, ``blocks_per_sm`` it allows, ``binding``."""
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
    """(blocks per SM registers allow, registers per block) as cudaOccMaxBlocksPerSMRegsLimit."""
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
    """Occupancy of a launch on one SM; ``shared_mem_per_block``: static + dynamic bytes (the
    reserved KiB is added here); ``shared_mem_carveout`` (bytes/SM) None: the driver's pick."""
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
#: the columns of :func:`occupancy_curve` after ``value`` and the varied parameter
CURVE_COLUMNS = (
    "occupancy_pct", "active_blocks_per_sm", "active_warps_per_sm", "limiter",
    "block_limit_registers", "block_limit_shared_mem", "block_limit_warps", "block_limit_blocks",
)  # fmt: skip


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
    """Nsight Compute's what-if curve: one row per value of ``vary`` (default: each that can move
    it), the others fixed; columns ``value``, ``vary``, then :data:`CURVE_COLUMNS`."""
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
        rows.append({"value": int(v), vary: int(v), **{c: getattr(r, c) for c in CURVE_COLUMNS}})
    return pd.DataFrame(rows, columns=["value", vary, *CURVE_COLUMNS])


def _wave_args(grid_size: int, active_blocks_per_sm: int, sm_count: int) -> tuple[int, int]:
    grid = _int("grid_size", grid_size, 1, 2**63, "blocks")
    per_sm = _int("active_blocks_per_sm", active_blocks_per_sm, 1, 2**31, "blocks")
    sms = _int("sm_count", sm_count, 1, 2**31, "SMs")
    return grid, per_sm * sms


def waves(grid_size: int, active_blocks_per_sm: int, sm_count: int) -> float:
    """Grid blocks / (active blocks per SM * SMs): 2.5 is two full waves and a half one."""
    grid, per_wave = _wave_args(grid_size, active_blocks_per_sm, sm_count)
    return grid / per_wave


def tail_fraction(grid_size: int, active_blocks_per_sm: int, sm_count: int) -> float:
    """How full the last, partial wave is, in [0, 1): 0.0 is no tail."""
    grid, per_wave = _wave_args(grid_size, active_blocks_per_sm, sm_count)
    return (grid % per_wave) / per_wave


def binding(ncu: pd.DataFrame) -> pd.DataFrame:
    """Per Nsight Compute row: one boolean column per limit, True where it is the smallest."""
    lim = ncu[list(LIMIT_COLUMNS.values())].set_axis(list(LIMIT_COLUMNS), axis=1)
    return lim.eq(lim.min(axis=1), axis=0)


def block_limiter(ncu: pd.DataFrame) -> pd.Series:
    """Per Nsight Compute row: its first binding limit in :data:`LIMITER_ORDER` (the
    calculator's ``limiter``)."""
    return binding(ncu).idxmax(axis=1)

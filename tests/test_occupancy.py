"""Theoretical occupancy (cudaOcc / Nsight Compute) against hand-checked cases.

Every expected number below was worked out by hand from cuda_occupancy.h's rules:
registers per warp = ceil(regs * 32 / 256) * 256; each of the 4 register sub-partitions
(16384 registers) holds floor(16384 / regs_per_warp) warps; shared memory per block =
ceil((bytes + reserved) / unit) * unit with 1 KiB reserved and a 128-byte unit on CC >= 8.0.
"""

import csv
import math
from pathlib import Path

import pytest

from yolo_sm.analyse.occupancy import (
    ARCH,
    LIMITER_ORDER,
    OccupancyResult,
    occupancy_curve,
    tail_fraction,
    theoretical_occupancy,
    waves,
)

KIB = 1024
FIXTURE = Path(__file__).parent / "fixtures" / "ncu_occupancy_h200.csv"

# cc, threads, regs, smem bytes -> occupancy %, active blocks, limiter,
#                                   (limit regs, limit smem, limit warps, limit blocks), config
# The carveout (config) is the smallest selectable size that still reaches the highest block
# count; with 1 KiB reserved per block on CC >= 8.0 that is at least 8 KiB (0 KiB holds none).
CASES = [
    # --- Hopper (H100/H200): 64 warps, 32 blocks, 228 KiB carveout, 227 KiB per block
    ("9.0", 256, 32, 0, 100.0, 8, "warps", (8, 8, 8, 32), 8 * KIB),
    ("9.0", 128, 255, 0, 12.5, 2, "registers", (2, 8, 16, 32), 8 * KIB),
    ("9.0", 384, 168, 0, 18.75, 1, "registers", (1, 8, 5, 32), 8 * KIB),
    # Hopper CUTLASS/cuDNN-style conv: 1 block of 12 warps per SM, held by shared memory
    ("9.0", 384, 64, 200 * KIB, 18.75, 1, "shared_mem", (2, 1, 5, 32), 228 * KIB),
    ("9.0", 384, 64, 100 * KIB, 37.5, 2, "registers", (2, 2, 5, 32), 228 * KIB),
    # 1-warp blocks: capped at 32 blocks = 32 warps
    ("9.0", 32, 16, 0, 50.0, 32, "blocks", (128, 32, 64, 32), 32 * KIB),
    # sub-partition rounding: 40 regs -> 1280/warp -> 12 warps per sub-partition -> 48 warps,
    # not floor(65536 / 1280) = 51 warps (which would allow 25 blocks of 2 warps)
    ("9.0", 64, 40, 0, 75.0, 24, "registers", (24, 32, 32, 32), 32 * KIB),
    # 33 regs rounds up to the same 1280 registers per warp as 40
    ("9.0", 256, 33, 0, 75.0, 6, "registers", (6, 8, 8, 32), 8 * KIB),
    ("9.0", 1024, 64, 0, 50.0, 1, "registers", (1, 8, 2, 32), 8 * KIB),
    # 65 regs: 2304/warp * 32 warps > 65536 registers per block -> cannot launch
    ("9.0", 1024, 65, 0, 0.0, 0, "registers", (0, 8, 2, 32), 8 * KIB),
    ("9.0", 1024, 255, 0, 0.0, 0, "registers", (0, 8, 2, 32), 8 * KIB),
    # 0 registers: no register limit (reported as the block cap)
    ("9.0", 128, 0, 0, 100.0, 16, "warps", (32, 16, 16, 32), 16 * KIB),
    # exactly the opt-in maximum: 227 KiB + 1 KiB reserved fills the 228 KiB carveout
    ("9.0", 128, 32, 227 * KIB, 6.25, 1, "shared_mem", (16, 1, 16, 32), 228 * KIB),
    # --- A100: 64 warps, 32 blocks, 164 KiB carveout, 163 KiB per block
    ("8.0", 256, 32, 0, 100.0, 8, "warps", (8, 8, 8, 32), 8 * KIB),
    ("8.0", 128, 255, 0, 12.5, 2, "registers", (2, 8, 16, 32), 8 * KIB),
    ("8.0", 384, 168, 0, 18.75, 1, "registers", (1, 8, 5, 32), 8 * KIB),
    # 100 KiB + 1 KiB: one block fits 132 KiB and also only one fits 164 KiB (9.0 fits two)
    ("8.0", 384, 64, 100 * KIB, 18.75, 1, "shared_mem", (2, 1, 5, 32), 132 * KIB),
    ("8.0", 32, 16, 0, 50.0, 32, "blocks", (128, 32, 64, 32), 32 * KIB),
    # --- Turing: 32 warps, 16 blocks, carveouts 32/64 KiB only, 256-byte unit, none reserved
    ("7.5", 256, 32, 0, 100.0, 4, "warps", (8, 16, 4, 16), 32 * KIB),
    ("7.5", 128, 255, 0, 25.0, 2, "registers", (2, 16, 8, 16), 32 * KIB),
    ("7.5", 384, 168, 0, 37.5, 1, "registers", (1, 16, 2, 16), 32 * KIB),
    ("7.5", 384, 64, 40 * KIB, 37.5, 1, "shared_mem", (2, 1, 2, 16), 64 * KIB),
    ("7.5", 32, 16, 0, 50.0, 16, "blocks", (128, 16, 32, 16), 32 * KIB),
    ("7.5", 128, 32, 100, 100.0, 8, "warps", (16, 128, 8, 16), 32 * KIB),
    # --- Volta: 0 KiB carveout possible
    ("7.0", 32, 16, 0, 50.0, 32, "blocks", (128, 32, 64, 32), 0),
    ("7.0", 256, 32, 48 * KIB, 25.0, 2, "shared_mem", (8, 2, 8, 32), 96 * KIB),
    # --- GA10x / Ada / Blackwell consumer: 48 warps
    ("8.6", 256, 32, 0, 100.0, 6, "warps", (8, 8, 6, 16), 8 * KIB),
    ("8.6", 32, 16, 0, 100 / 3, 16, "blocks", (128, 16, 48, 16), 16 * KIB),
    ("8.9", 32, 16, 0, 50.0, 24, "blocks", (128, 32, 48, 24), 32 * KIB),
    ("12.0", 384, 168, 0, 25.0, 1, "registers", (1, 8, 4, 24), 8 * KIB),
    ("12.0", 512, 32, 0, 100.0, 3, "warps", (4, 8, 3, 24), 8 * KIB),
]


@pytest.mark.parametrize(
    "cc,threads,regs,smem,pct,blocks,limiter,limits,config",
    CASES,
    ids=[f"{c[0]}-{c[1]}t-{c[2]}r-{c[3]}B" for c in CASES],
)
def test_hand_checked(cc, threads, regs, smem, pct, blocks, limiter, limits, config):
    r = theoretical_occupancy(cc, threads, regs, smem)
    got = (
        r.block_limit_registers,
        r.block_limit_shared_mem,
        r.block_limit_warps,
        r.block_limit_blocks,
    )
    assert got == limits
    assert r.active_blocks_per_sm == blocks == min(limits)
    assert r.occupancy_pct == pytest.approx(pct)
    assert r.limiter == limiter
    assert r.shared_mem_config_bytes == config
    assert r.active_warps_per_sm == blocks * r.warps_per_block
    assert r.max_warps_per_sm == ARCH[cc].max_warps_per_sm


def test_allocations_h200():
    r = theoretical_occupancy("9.0", 384, 168, 200 * KIB + 5)
    assert r.warps_per_block == 12
    assert r.registers_per_block_allocated == 5376 * 12  # 168*32 = 5376 = 21 * 256
    # 204805 + 1024 reserved = 205829 -> next multiple of 128
    assert r.shared_mem_per_block_allocated == 205952
    t = theoretical_occupancy("7.5", 96, 33, 5)
    assert t.registers_per_block_allocated == 1280 * 3
    assert t.shared_mem_per_block_allocated == 256  # no reservation, 256-byte unit
    assert theoretical_occupancy("7.5", 96, 33, 0).shared_mem_per_block_allocated == 0


@pytest.mark.parametrize(
    "cc,warps,blocks,smem_sm,smem_block,unit,reserved,carveouts_kib",
    [
        ("7.0", 64, 32, 96, 96, 256, 0, (0, 8, 16, 32, 64, 96)),
        ("7.5", 32, 16, 64, 64, 256, 0, (32, 64)),
        ("8.0", 64, 32, 164, 163, 128, 1024, (0, 8, 16, 32, 64, 100, 132, 164)),
        ("8.6", 48, 16, 100, 99, 128, 1024, (0, 8, 16, 32, 64, 100)),
        ("8.9", 48, 24, 100, 99, 128, 1024, (0, 8, 16, 32, 64, 100)),
        ("9.0", 64, 32, 228, 227, 128, 1024, (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)),
        ("10.0", 64, 32, 228, 227, 128, 1024, (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)),
        ("12.0", 48, 24, 100, 99, 128, 1024, (0, 8, 16, 32, 64, 100)),
    ],
)
def test_arch_table(cc, warps, blocks, smem_sm, smem_block, unit, reserved, carveouts_kib):
    a = ARCH[cc]
    assert (a.max_warps_per_sm, a.max_blocks_per_sm) == (warps, blocks)
    assert a.max_shared_mem_per_sm == smem_sm * KIB == a.shared_mem_carveouts[-1]
    assert a.max_shared_mem_per_block == smem_block * KIB
    assert (a.shared_mem_allocation_unit, a.reserved_shared_mem_per_block) == (unit, reserved)
    assert a.shared_mem_carveouts == tuple(k * KIB for k in carveouts_kib)
    assert (a.registers_per_sm, a.max_registers_per_thread, a.register_allocation_unit) == (
        65536,
        255,
        256,
    )
    assert (a.warp_size, a.max_threads_per_block) == (32, 1024)


def test_all_supported_ccs_present():
    want = {
        "7.0",
        "7.2",
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.9",
        "9.0",
        "10.0",
        "10.3",
        "11.0",
        "12.0",
        "12.1",
    }
    assert set(ARCH) == want
    for cc in want:
        assert theoretical_occupancy(cc, 256, 32, 0).occupancy_pct == 100.0


def test_explicit_carveout():
    # 256 threads, 32 regs, 16 KiB smem on H200: 17 KiB allocated per block.
    auto = theoretical_occupancy("9.0", 256, 32, 16 * KIB)
    assert auto.active_blocks_per_sm == 8 and auto.shared_mem_config_bytes == 164 * KIB
    r = theoretical_occupancy("9.0", 256, 32, 16 * KIB, shared_mem_carveout=64 * KIB)
    assert (r.block_limit_shared_mem, r.active_blocks_per_sm, r.limiter) == (3, 3, "shared_mem")
    assert r.occupancy_pct == pytest.approx(37.5)
    # 50 KiB is rounded up to the next carveout, 64 KiB
    assert (
        theoretical_occupancy(
            "9.0", 256, 32, 16 * KIB, shared_mem_carveout=50 * KIB
        ).shared_mem_config_bytes
        == 64 * KIB
    )
    # a carveout too small for one block is replaced by the smallest one that fits it (cudaOcc)
    small = theoretical_occupancy("9.0", 256, 32, 16 * KIB, shared_mem_carveout=0)
    assert (small.shared_mem_config_bytes, small.active_blocks_per_sm) == (32 * KIB, 1)
    full = theoretical_occupancy("9.0", 256, 32, 16 * KIB, shared_mem_carveout=228 * KIB)
    assert full.block_limit_shared_mem == 13 and full.active_blocks_per_sm == 8


@pytest.mark.parametrize(
    "args,match",
    [
        (("9.0", 0, 32, 0), "threads_per_block"),
        (("9.0", 1025, 32, 0), "threads_per_block"),
        (("9.0", -32, 32, 0), "threads_per_block"),
        (("9.0", 128, 256, 0), "registers_per_thread"),
        (("9.0", 128, -1, 0), "registers_per_thread"),
        (("9.0", 128, 32, -1), "shared_mem_per_block"),
        (("9.0", 128, 32, 227 * KIB + 1), "shared_mem_per_block"),
        (("8.0", 384, 64, 200 * KIB), "shared_mem_per_block"),
        (("7.5", 128, 32, 64 * KIB + 1), "shared_mem_per_block"),
        (("9.0", 128.5, 32, 0), "integer"),
        (("6.1", 128, 32, 0), "9.0"),
        (("9", 128, 32, 0), "supported"),
    ],
)
def test_invalid_inputs(args, match):
    with pytest.raises(ValueError, match=match):
        theoretical_occupancy(*args)


def test_invalid_carveout():
    with pytest.raises(ValueError, match="shared_mem_carveout"):
        theoretical_occupancy("9.0", 128, 32, 0, shared_mem_carveout=229 * KIB)
    with pytest.raises(ValueError, match="shared_mem_carveout"):
        theoretical_occupancy("9.0", 128, 32, 0, shared_mem_carveout=-1)


def test_result_is_frozen_and_dict():
    r = theoretical_occupancy("9.0", 256, 32, 0)
    assert isinstance(r, OccupancyResult)
    with pytest.raises(AttributeError):
        r.occupancy_pct = 1.0
    d = r.as_dict()
    assert d["occupancy_pct"] == 100.0 and d["limiter"] == "warps"
    assert d["shared_mem_per_block_allocated"] == 1024
    assert set(LIMITER_ORDER) == {"registers", "shared_mem", "warps", "blocks"}


@pytest.mark.parametrize("cc", ["7.5", "8.0", "8.6", "9.0", "12.0"])
@pytest.mark.parametrize("threads,smem", [(128, 0), (256, 8 * KIB), (384, 40 * KIB), (1024, 0)])
def test_curve_monotone_in_registers(cc, threads, smem):
    df = occupancy_curve(
        cc,
        vary="registers_per_thread",
        threads_per_block=threads,
        registers_per_thread=32,
        shared_mem_per_block=smem,
    )
    assert list(df["value"]) == sorted(df["value"]) and df["value"].is_unique
    assert {0, 8, 32, 248, 255} <= set(df["value"])
    assert (df["value"] == df["registers_per_thread"]).all()
    assert (df["occupancy_pct"].diff().dropna() <= 1e-9).all()
    assert (df["active_blocks_per_sm"].diff().dropna() <= 0).all()
    # every step of the register limit is sampled on both sides
    for v in df["value"]:
        if 0 < v < 255:
            lim = theoretical_occupancy(cc, threads, v, smem).block_limit_registers
            nxt = theoretical_occupancy(cc, threads, v + 1, smem).block_limit_registers
            if lim != nxt:
                assert v + 1 in set(df["value"])


def test_curve_registers_h200_steps():
    df = occupancy_curve(
        "9.0",
        vary="registers_per_thread",
        threads_per_block=256,
        registers_per_thread=32,
        shared_mem_per_block=0,
    ).set_index("value")
    # 32 regs: 100 %; 40 regs (1280/warp) and 33 regs: 75 %; 64: 50 %; 128: 25 %
    assert df.loc[32, "occupancy_pct"] == 100.0
    assert df.loc[33, "occupancy_pct"] == 75.0
    assert df.loc[64, "occupancy_pct"] == 50.0 and df.loc[72, "occupancy_pct"] == 37.5
    assert df.loc[128, "occupancy_pct"] == 25.0 and df.loc[128, "limiter"] == "registers"


def test_curve_block_size_and_smem():
    df = occupancy_curve(
        "9.0",
        vary="threads_per_block",
        threads_per_block=256,
        registers_per_thread=32,
        shared_mem_per_block=0,
    )
    assert list(df["value"]) == list(range(32, 1025, 32))
    by = df.set_index("value")
    assert by.loc[32, "occupancy_pct"] == 50.0 and by.loc[32, "limiter"] == "blocks"
    assert by.loc[64, "occupancy_pct"] == 100.0
    assert by.loc[640, "occupancy_pct"] == pytest.approx(93.75)  # 20 warps: 3 blocks fit
    assert set(df.columns) >= {
        "value",
        "threads_per_block",
        "occupancy_pct",
        "active_blocks_per_sm",
        "active_warps_per_sm",
        "limiter",
    }

    sm = occupancy_curve(
        "9.0",
        vary="shared_mem_per_block",
        threads_per_block=128,
        registers_per_thread=32,
        shared_mem_per_block=5000,
    )
    vals = list(sm["value"])
    assert vals[0] == 0 and vals[-1] == 227 * KIB and 5000 in vals and 100 < len(vals) < 300
    assert (sm["occupancy_pct"].diff().dropna() <= 1e-9).all()
    by = sm.set_index("value")
    # 128 threads = 4 warps: 16 blocks need <= 228 KiB / 16 = 14.25 KiB per block incl. 1 KiB
    assert by.loc[13 * KIB, "occupancy_pct"] == 100.0
    assert by.loc[14 * KIB, "occupancy_pct"] == 93.75
    assert by.loc[227 * KIB, "active_blocks_per_sm"] == 1

    custom = occupancy_curve(
        "8.0",
        vary="threads_per_block",
        threads_per_block=128,
        registers_per_thread=32,
        shared_mem_per_block=0,
        values=[96, 1024],
    )
    # 3-warp blocks: 21 fit in 64 warp slots; 32-warp blocks: 2 fit
    assert list(custom["occupancy_pct"]) == pytest.approx([100 * 63 / 64, 100.0])
    with pytest.raises(ValueError, match="vary"):
        occupancy_curve(
            "9.0", vary="grid", threads_per_block=1, registers_per_thread=1, shared_mem_per_block=0
        )


@pytest.mark.parametrize(
    "grid,per_sm,sms,w,tail",
    [
        (132, 1, 132, 1.0, 0.0),
        (264, 1, 132, 2.0, 0.0),
        (133, 1, 132, 133 / 132, 1 / 132),
        (1000, 8, 132, 1000 / 1056, 1000 / 1056),
        (2000, 8, 132, 2000 / 1056, 944 / 1056),
        (1, 32, 132, 1 / 4224, 1 / 4224),
    ],
)
def test_waves_and_tail(grid, per_sm, sms, w, tail):
    assert waves(grid, per_sm, sms) == pytest.approx(w)
    assert tail_fraction(grid, per_sm, sms) == pytest.approx(tail)
    assert tail_fraction(grid, per_sm, sms) == pytest.approx(w - math.floor(w))


@pytest.mark.parametrize("args", [(0, 1, 132), (10, 0, 132), (10, 1, 0), (-1, 1, 1)])
def test_waves_invalid(args):
    with pytest.raises(ValueError):
        waves(*args)
    with pytest.raises(ValueError):
        tail_fraction(*args)


def test_module_import_is_light():
    import subprocess
    import sys

    code = "import sys, yolo_sm.analyse.occupancy; print('pandas' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    # yolo_sm/__init__ may import pandas itself; then this says nothing about occupancy.py
    init = subprocess.run(
        [sys.executable, "-c", "import sys, yolo_sm; print('pandas' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    if init.stdout.strip() == "False":
        assert out.stdout.strip() == "False"


def _ncu_rows():
    with FIXTURE.open(newline="") as fh:
        rows = [
            {k.strip(): (v or "").strip() for k, v in row.items()}
            for row in csv.DictReader(fh, skipinitialspace=True)
        ]
    return rows


def test_matches_nsight_compute_h200():
    """Ground truth from Nsight Compute on the H200 (CC 9.0), when the lead has recorded it.

    Occupancy and the register, warp and block limits must equal ncu's. ncu's shared-memory
    limit is taken at the carveout the driver chose, so without that carveout it need only be
    what some carveout allows: at most our limit at the largest carveout (228 KiB). With an
    optional ``shared_mem_config_bytes`` column (ncu's launch__shared_mem_config_size in
    bytes) our limit at that carveout must equal ncu's."""
    if not FIXTURE.exists():
        pytest.skip(f"no Nsight Compute fixture at {FIXTURE} (recorded on the H200)")
    rows = _ncu_rows()
    assert rows, f"{FIXTURE} has no rows"
    max_carveout = ARCH["9.0"].max_shared_mem_per_sm
    failures = []
    for i, row in enumerate(rows):

        def num(col):
            return int(float(row[col]))  # noqa: B023 - used inside this iteration only

        args = (
            "9.0",
            num("block_size"),
            num("registers_per_thread"),
            num("shared_mem_static_bytes") + num("shared_mem_dynamic_bytes"),
        )
        ours = theoretical_occupancy(*args)
        upper = theoretical_occupancy(*args, shared_mem_carveout=max_carveout)
        ncu_pct = float(row["theoretical_occupancy_pct"])
        where = f"row {i} {row['kernel_name'][:60]!r} {args[1:]}"
        if abs(ours.occupancy_pct - ncu_pct) >= 0.01:
            failures.append(f"{where}: occupancy {ours.occupancy_pct:.2f} != ncu {ncu_pct:.2f}")
        for ours_name, col in [
            ("block_limit_registers", "limit_registers"),
            ("block_limit_warps", "limit_warps"),
            ("block_limit_blocks", "limit_blocks"),
        ]:
            if getattr(ours, ours_name) != num(col):
                failures.append(f"{where}: {col} {getattr(ours, ours_name)} != ncu {num(col)}")
        ncu_smem = num("limit_shared_mem")
        if ncu_smem != ours.block_limit_shared_mem and ncu_smem > upper.block_limit_shared_mem:
            failures.append(
                f"{where}: ncu limit_shared_mem {ncu_smem} > ours at 228 KiB "
                f"{upper.block_limit_shared_mem}"
            )
        if row.get("shared_mem_config_bytes"):
            config = min(round(float(row["shared_mem_config_bytes"])), max_carveout)
            at = theoretical_occupancy(*args, shared_mem_carveout=config)
            if at.block_limit_shared_mem != ncu_smem:
                failures.append(
                    f"{where}: limit_shared_mem at {config} B "
                    f"{at.block_limit_shared_mem} != ncu {ncu_smem}"
                )
    assert not failures, f"{len(failures)} of {len(rows)} rows differ:\n" + "\n".join(failures)


def _cuda_occ_active_blocks(cc, threads, regs, smem):
    """Literal port of cudaOccMaxActiveBlocksPerMultiprocessor (cuda_occupancy.h, CUDA 12.6)
    in its default state: carveout preference = the SM's maximum shared memory."""
    a = ARCH[cc]
    warps = -(-threads // 32)
    per_warp = -(-regs * 32 // 256) * 256
    if per_warp == 0:
        regs_limit = 10**9
    elif max(per_warp * warps, per_warp * (-(-warps // 4) * 4)) > 65536:
        regs_limit = 0
    else:
        regs_limit = (16384 // per_warp) * 4 // warps
    unit = a.shared_mem_allocation_unit
    alloc = -(-(smem + a.reserved_shared_mem_per_block) // unit) * unit
    smem_limit = a.max_shared_mem_per_sm // alloc if alloc else 10**9
    return min(regs_limit, smem_limit, a.max_warps_per_sm // warps, a.max_blocks_per_sm)


@pytest.mark.parametrize("cc", sorted(ARCH))
def test_same_active_blocks_as_cuda_occ(cc):
    """Our carveout choice never changes the block count cudaOcc gives at the largest one."""
    top = ARCH[cc].max_shared_mem_per_block
    for threads in (32, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024):
        for regs in (0, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 168, 200, 232, 255):
            for smem in (0, 1, 1000, 4 * KIB, 12 * KIB, 40 * KIB, 47 * KIB, top // 3, top):
                want = _cuda_occ_active_blocks(cc, threads, regs, smem)
                got = theoretical_occupancy(cc, threads, regs, smem).active_blocks_per_sm
                assert got == want, (threads, regs, smem)


def test_equals_nsight_compute_on_every_kernel_of_the_shipped_h200_tables():
    """Every kernel of the five Nsight Compute tables collected by the plan (5,593 kernels,
    88 distinct launch configurations, some not in the fixture above)."""
    import pandas as pd

    from yolo_sm.contract import datasets

    names = ["ncu_width_b8", "ncu_batch_w1", "ncu_precision_w1", "ncu_wide_stack", "ncu_resnet101"]
    d = pd.concat([datasets.load(f"h200/{n}") for n in names], ignore_index=True)
    cols = ["block_size", "registers_per_thread", "shared_mem_per_block_bytes"]
    u = d.drop_duplicates(cols + ["theoretical_occupancy_pct"])
    ours = [
        theoretical_occupancy("9.0", int(b), int(r), int(s)).occupancy_pct
        for b, r, s in u[cols].itertuples(index=False)
    ]
    assert len(d) > 5000 and len(u) > 50
    assert (abs(pd.Series(ours, index=u.index) - u.theoretical_occupancy_pct) < 0.01).all()


def test_binding_limits_name_every_tied_limit():
    from yolo_sm.analyse.occupancy import limits_table

    # 384 threads x 168 registers and 226 KiB of shared memory: one block by either resource
    r = theoretical_occupancy("9.0", 384, 168, 231424)
    assert r.limiter == "registers" and r.binding_limits == ("registers", "shared_mem")
    t = limits_table(r).set_index("limit")
    assert t.loc["shared_mem", "blocks_per_sm"] == 1 and t.binding.sum() == 2
    # the same launch without shared memory: registers alone
    assert theoretical_occupancy("9.0", 384, 168, 0).binding_limits == ("registers",)
    assert theoretical_occupancy("9.0", 256, 32, 0).binding_limits == (
        "warps",
        "registers",
        "shared_mem",
    )

"""Build the compact occupancy ground-truth fixture from Nsight Compute raw CSVs (H200).

    python tools/make_ncu_fixture.py OUT.csv ncu_*.csv
One row per distinct launch configuration (kernel, block, grid, registers, shared memory)."""

import sys

import pandas as pd

from yolo_sm.collect.profiling.ncu import load_ncu

out, *inputs = sys.argv[1:]
df = pd.concat([load_ncu(p) for p in inputs], ignore_index=True)
cols = [
    "kernel_name",
    "block_size",
    "registers_per_thread",
    "shared_mem_static_bytes",
    "shared_mem_dynamic_bytes",
    "grid_size",
    "shared_mem_config_bytes",
    "theoretical_occupancy_pct",
    "limit_registers",
    "limit_shared_mem",
    "limit_warps",
    "limit_blocks",
    "nvtx_range",
]
key = cols[:6]
fx = df[cols].drop_duplicates(subset=key).sort_values(key, ignore_index=True)
fx["kernel_name"] = fx.kernel_name.str.slice(0, 120)
fx.to_csv(out, index=False)
print(f"{len(df)} kernels profiled, {len(fx)} distinct launch configurations -> {out}")

#!/usr/bin/env bash
# Nsight Compute ground truth for the occupancy calculator (issue 3): launch statistics and
# theoretical occupancy of every kernel in several forwards (one ncu process, one pass each).
source tools/h200.sh
M=launch__block_size,launch__grid_size,launch__registers_per_thread,launch__shared_mem_per_block_static
M=$M,launch__shared_mem_per_block_dynamic,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
M=$M,launch__occupancy_limit_warps,launch__occupancy_limit_blocks,sm__maximum_warps_per_active_cycle_pct
M=$M,launch__waves_per_multiprocessor,launch__shared_mem_config_size,launch__occupancy_per_block_size
M=$M,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active
run() {  # run NAME TIMEOUT CONFIG_PREFIX...
  local name=$1 t=$2; shift 2
  /usr/bin/time -f "ncu $name wall %e s" timeout $t /usr/local/cuda/bin/ncu --clock-control none \
    --nvtx --nvtx-include 'profiled_forward/' --metrics "$M" --csv --page raw \
    --log-file $OUT/ncu_$name.csv python3 tools/ncu_target.py "$@" 2>&1 | grep -v "^==PROF==" | tail -8
  wc -l $OUT/ncu_$name.csv
}
run wide 60 wide yolov8_w0.25
run fp16 100 yolov8_w1.0_fp16 yolov8_w2.0
run other 90 yolov8_w1.0_fp32 yolov8_w1.0_bf16 yolo11
ls -la $OUT

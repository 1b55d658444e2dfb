#!/usr/bin/env bash
# Session 7, third call (~600 s of device time left): sweep_bf16_nhwc's last points, the
# ceilings at 8192^3 and 16384^3, the GPU tests of what changed since the last GPU run
# (cudagraph pool, ceilings), the pipeline probe, then ncu_throughput_w1 if it fits.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
run() { left=$(( 530 - SECONDS )); timeout $(( left - 5 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml \
  --out data/h200 --max-minutes $(python3 -c "print(round(($left-15)/60,2))") --only $1 --quiet >> $OUT/collect.log 2>&1; echo "$1 rc=$?"; }
run sweep_bf16_nhwc
run ceilings
timeout -s INT 60 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_gpu_profilers.py \
  -k ceilings > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"; tail -2 $OUT/pytest_gpu.log
run probe_pipeline_w05_b16
run ncu_throughput_w1
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/sweep_bf16_nhwc.parquet data/h200/ceilings.parquet $OUT/h200/ \
  && cp data/h200/ncu_throughput_w1.parquet data/h200/probe_pipeline_w05_b16.parquet $OUT/h200/ 2>/dev/null
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --status | grep -E "bf16|ceilings|ncu_throughput|probe"

#!/usr/bin/env bash
# Prepared in session 6 for the next session, after h200_s7a.sh: the plan's last profiling
# steps (ncu_throughput_w1: the Nsight Compute throughput set, ~200 s; probe_pipeline_w05_b16:
# the pipeline stage by stage, ~60 s), then every GPU test with the time left (160 s in
# session 5).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
timeout 360 python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes 5.5 \
  --only ncu_throughput_w1,probe_pipeline_w05_b16 --quiet > $OUT/collect.log 2>&1
echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json $OUT/h200/ \
  && cp data/h200/ncu_throughput_w1.parquet data/h200/probe_pipeline_w05_b16.parquet $OUT/h200/ 2>/dev/null
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
left=$(( 580 - SECONDS ))
timeout -s INT $(( left - 10 )) python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests -rs \
  > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --status | grep -E "ncu_throughput|probe"
grep -E "passed|failed|FAILED|SKIPPED" $OUT/pytest_gpu.log | tail -8

#!/usr/bin/env bash
# Prepared in session 6 for the next session, after h200_s7a.sh: the ceilings again (matmuls
# at 8192^3 and 16384^3, ~20 s), the plan's last profiling steps (ncu_throughput_w1: the Nsight
# Compute throughput set, ~200 s; probe_pipeline_w05_b16: the pipeline stage by stage, ~60 s),
# then every GPU test with the time left (160 s in session 5).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
# the ceilings again with 8192^3 and 16384^3 matmuls (plan params since session 6; ~20 s)
rm data/h200/ceilings.parquet  # the 8192^3-only table stays in git
timeout 390 python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes 6 \
  --only ceilings,ncu_throughput_w1,probe_pipeline_w05_b16 --quiet > $OUT/collect.log 2>&1
echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json $OUT/h200/ \
  && cp data/h200/ceilings.parquet data/h200/ncu_throughput_w1.parquet data/h200/probe_pipeline_w05_b16.parquet $OUT/h200/ 2>/dev/null
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
left=$(( 580 - SECONDS ))
timeout -s INT $(( left - 10 )) python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests -rs \
  > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --status | grep -E "ceilings|ncu_throughput|probe"
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/ceilings.parquet'); print(d[['ceiling','value','unit','size']].to_string())"
grep -E "passed|failed|FAILED|SKIPPED" $OUT/pytest_gpu.log | tail -8

#!/usr/bin/env bash
# Prepared in session 6 for the next session, after h200_s7a.sh: the ceilings again (matmuls
# at 8192^3 and 16384^3, ~20 s; `collect --status` says `changed`: the manifest records the
# params that made the shipped table), every GPU test (~170 s in session 5, more tests since), then the
# plan's last profiling steps with the time left (ncu_throughput_w1: the Nsight Compute
# throughput set, ~200 s; probe_pipeline_w05_b16: the pipeline stage by stage, ~60 s; a step
# that does not fit waits for the next call: run this script again).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
# first call only (the ceilings table lacks the 16384^3 rows): ceilings, then the GPU tests
if python3 -c "import pandas as pd, sys; d = pd.read_parquet('data/h200/ceilings.parquet'); sys.exit(0 if d.ceiling.str.contains('_n16384').any() else 1)"; then
  echo "ceilings and GPU tests: done in an earlier call"
else
  timeout 90 python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --only ceilings \
    --quiet > $OUT/collect_ceilings.log 2>&1; echo "ceilings rc=$?"
  timeout -s INT 230 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests -rs \
    > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
fi
left=$(( 575 - SECONDS ))
timeout $(( left - 10 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 \
  --max-minutes $(python3 -c "print(round(($left-20)/60,2))") \
  --only ncu_throughput_w1,probe_pipeline_w05_b16 --quiet > $OUT/collect.log 2>&1
echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/ceilings.parquet $OUT/h200/ \
  && cp data/h200/ncu_throughput_w1.parquet data/h200/probe_pipeline_w05_b16.parquet $OUT/h200/ 2>/dev/null
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --status | grep -E "ceilings|ncu_throughput|probe"
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/ceilings.parquet'); print(d[['ceiling','value','unit','size']].to_string())"
grep -E "passed|failed|FAILED|SKIPPED" $OUT/pytest_gpu.log 2>/dev/null | tail -8

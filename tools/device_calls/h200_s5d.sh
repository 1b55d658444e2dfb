#!/usr/bin/env bash
# Session 5, device call D: the pipeline GPU tests with the Triton fixpoint kernel (boxes vs
# ultralytics, 3 streams vs 1), then issue 4's sweep_presets error rows measured again
# (fp16 was checked on noise; now on the photos) and its missing points, with the time left.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
timeout -s INT 100 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_gpu_profilers.py \
  -k "pipeline or triton" -rs > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
left=$(( ${BUDGET:-330} - SECONDS ))
echo "collect with ${left}s left"
timeout $(( left - 10 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 \
  --max-minutes $(python3 -c "print(round(($left-25)/60,2))") --only sweep_presets \
  --redo-errors NumericalMismatch --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/sweep_presets.parquet $OUT/h200/
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
grep -E "passed|failed|FAILED" $OUT/pytest_gpu.log | tail -5
tail -3 $OUT/collect.log
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/sweep_presets.parquet'); print(len(d), d.status.value_counts().to_dict())
print(d[d.status!='ok'][['model','precision','layout','backend','batch','status','message']].to_string()[:1500])"

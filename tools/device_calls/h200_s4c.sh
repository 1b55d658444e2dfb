#!/usr/bin/env bash
# Session 4, device call C: GPU tests of the pipeline (chunked NMS), fp8 (plan tuning) and the
# bench, then the bench_fast_engines step again for the batch-16/64 units of widths 0.5, 1.0, 2.0
# (their rows dropped first, so the step re-measures them in one run with the changed code).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
timeout -s INT 120 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_gpu_profilers.py \
  tests/test_gpu_engines.py tests/test_gpu_bench.py -k "pipeline or fp8 or bench" -rs -s > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?"
python3 -c "
import pandas as pd; f='data/h200/bench_fast_engines.parquet'; d=pd.read_parquet(f)
redo = d.width.isin([0.5, 1.0, 2.0]) & d.batch.isin([16, 64]); d[~redo].to_parquet(f); print('dropped', int(redo.sum()), 'rows')"
left=$(( 578 - SECONDS ))
echo "collect with ${left}s left"
timeout $(( left - 12 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes $(python3 -c "print(round(($left-75)/60,2))") \
  --only bench_fast_engines --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
cp -r data/h200 $OUT/h200 && tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
grep -v -i warn $OUT/pytest_gpu.log | grep "passed\|failed\|Error\|assert\|stream" | tail -12
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/bench_fast_engines.parquet'); d=d[d.width.isin([0.5,1.0,2.0]) & d.batch.isin([16,64])]
print(d[['width','batch','variant','status','median_ms','img_per_s','vs_baseline','pipeline_vs_model_only','build_s']].round(3).to_string())"

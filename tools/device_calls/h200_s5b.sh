#!/usr/bin/env bash
# Session 5, device call B: the two Triton NMS kernels' GPU tests (stop if they fail), then the
# whole bench_fast_engines table again in one run with this code (all shipped rows dropped;
# units in the plan's order, as many as fit).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
timeout -s INT 90 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_gpu_profilers.py \
  -k "triton" -rs > $OUT/pytest_gpu.log 2>&1
rc=$?; echo "pytest rc=$rc"; tail -3 $OUT/pytest_gpu.log
[ $rc -eq 0 ] || exit 1
python3 -c "
import pandas as pd; f='data/h200/bench_fast_engines.parquet'; d=pd.read_parquet(f)
d.iloc[:0].to_parquet(f); print('dropped', len(d), 'rows')"
left=$(( 585 - SECONDS ))
echo "collect with ${left}s left"
timeout $(( left - 12 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes $(python3 -c "print(round(($left-75)/60,2))") \
  --only bench_fast_engines --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/bench_fast_engines.parquet $OUT/h200/
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
tail -4 $OUT/collect.log
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/bench_fast_engines.parquet')
print(d[['width','batch','variant','status','median_ms','img_per_s','vs_baseline','pipeline_vs_model_only']].round(3).to_string())"

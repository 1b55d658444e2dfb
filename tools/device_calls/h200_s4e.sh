#!/usr/bin/env bash
# Session 4, device call E (the last ~180 s): the pipeline GPU tests with nms_matrix, then the
# bench_fast_engines unit w0.5 b16 (goal 4's setting) again with it.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
timeout -s INT 40 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_gpu_profilers.py \
  -k pipeline -rs -s > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
python3 -c "
import pandas as pd; f='data/h200/bench_fast_engines.parquet'; d=pd.read_parquet(f)
redo = (d.width == 0.5) & (d.batch == 16); d[~redo].to_parquet(f); print('dropped', int(redo.sum()), 'rows')"
timeout 85 python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes 0.3 \
  --only bench_fast_engines --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/bench_fast_engines.parquet $OUT/h200/
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
grep -E "passed|failed|stream:|Error" $OUT/pytest_gpu.log | tail -5
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/bench_fast_engines.parquet'); d=d[(d.width==0.5)&(d.batch==16)]
print(d[['variant','status','median_ms','p99_ms','img_per_s','vs_baseline','pipeline_vs_model_only','nms']].round(3).to_string())"

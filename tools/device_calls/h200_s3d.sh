#!/usr/bin/env bash
# Session 3, device call D: pipeline GPU test, Kineto traces of the fp16 and fp8 engines (w1.0 b64),
# the bench's batch-16 units again with the batched NMS (frames-to-boxes goal).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
mkdir -p $OUT/h200 $OUT/t
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/bench_fast_engines.parquet'); d[d.batch!=16].to_parquet('$OUT/h200/bench_fast_engines.parquet')"
cp data/h200/manifest.json $OUT/h200/
timeout 40 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_profilers.py -k pipeline > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
for p in fp16 fp8; do timeout 40 python3 -m yolo_sm trace --width 1.0 --batch 64 --precision $p --layout nhwc \
  --backend eager --iters 2 --out $OUT/t/trace_w1_b64_$p.json.gz > $OUT/t/trace_$p.log 2>&1; echo "trace $p rc=$?"; done
tar czf $OUT/traces.tgz -C $OUT t && rm -rf $OUT/t
timeout 200 python3 -m yolo_sm collect --plan data/plans/h200.yaml --out $OUT/h200 --max-minutes 3.2 \
  --only bench_fast_engines --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
rm -f $OUT/h200/manifest.json
tail -3 $OUT/pytest_gpu.log; grep -v -i "warn" $OUT/collect.log | grep -v "^ " | tail -4
python3 -c "
import pandas as pd; d=pd.read_parquet('$OUT/h200/bench_fast_engines.parquet'); d=d[(d.batch==16)]
print(d[['width','variant','status','median_ms','p99_ms','img_per_s','vs_baseline','pipeline_vs_model_only']].round(3).to_string())"

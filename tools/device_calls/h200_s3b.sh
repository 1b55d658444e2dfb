#!/usr/bin/env bash
# Session 3, device call B: a trial bench (fp8 and compile modes at w1.0), all GPU tests, plan steps.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
( time timeout 210 python3 -m yolo_sm bench --models yolov8:1.0 --batches 64,1 --streams 3 --seconds 1 \
  --engines cudagraph/fp16/nhwc,cudagraph/fp8/nhwc,eager/fp8/nhwc,compile/fp16/nhwc,compile:reduce-overhead/fp16/nhwc \
  --out $OUT/bench_trial.parquet ) > $OUT/bench.log 2>&1; echo "bench rc=$?"
timeout 170 python3 -m pytest -m gpu -q -p no:cacheprovider tests -rs --durations=10 > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json $OUT/h200/
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out $OUT/h200 --max-minutes 3.2 \
  --only ceilings,sweep_precision_core,sweep_bf16_nhwc --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
echo "== bench"; python3 -c "
import pandas as pd; pd.set_option('display.width',250); d=pd.read_parquet('$OUT/bench_trial.parquet')
cols=[c for c in ['width','batch','variant','status','median_ms','p99_ms','img_per_s','vs_baseline','rel_err','build_s','pipeline_vs_model_only'] if c in d]
print(d[cols].to_string()); print(d.loc[d.status!='ok', 'message'].str[:200].to_string())"
grep -E "^real" $OUT/bench.log
tail -25 $OUT/pytest_gpu.log; grep -v -i "warn" $OUT/collect.log | tail -8

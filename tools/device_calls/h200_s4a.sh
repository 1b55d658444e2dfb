#!/usr/bin/env bash
# Session 4, device call A: the merged pipeline-overlap and fp8-autotune branches on the GPU
# (their GPU tests, the bench's GPU test, fp8_diag with plan tuning), two small benches
# (pipeline w0.5 b16 at 1/3 streams; fp8 vs fp16 CUDA graph at w1.0 b64), then plan steps
# of the datasets issue with the time left.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_profilers.py tests/test_gpu_engines.py \
  tests/test_gpu_bench.py -k "pipeline or fp8 or triton or bench" -rs > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
timeout 90 python3 tools/fp8_diag.py --width 1.0 --out $OUT/fp8_diag.jsonl > $OUT/fp8_diag.log 2>&1; echo "diag rc=$?"
timeout 120 python3 -m yolo_sm bench --models yolov8:0.5 --batches 16 --engines cudagraph/fp16/nhwc --streams 1,3 \
  --seconds 2 --out $OUT/b_pipe.parquet > $OUT/bench.log 2>&1; echo "bench pipe rc=$?"
timeout 100 python3 -m yolo_sm bench --models yolov8:1.0 --batches 64 --engines cudagraph/fp16/nhwc,cudagraph/fp8/nhwc \
  --streams 3 --no-predict --seconds 1 --out $OUT/b_fp8.parquet >> $OUT/bench.log 2>&1; echo "bench fp8 rc=$?"
left=$(( 545 - SECONDS ))
echo "collect with ${left}s left"
if [ $left -gt 70 ]; then
  python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes $(python3 -c "print(round(($left-40)/60,2))") \
    --only ${STEPS:-sweep_precision_core} --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
  cp -r data/h200 $OUT/h200 && tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
fi
tail -4 $OUT/pytest_gpu.log
grep -v -i warn $OUT/fp8_diag.log | tail -12
python3 -c "
import pandas as pd
for f in ('$OUT/b_pipe.parquet','$OUT/b_fp8.parquet'):
    try: d=pd.read_parquet(f)
    except Exception as e: print(f, e); continue
    cols=[c for c in ['width','batch','variant','status','median_ms','p99_ms','img_per_s','vs_baseline','model_only_img_per_s','pipeline_vs_model_only','message'] if c in d]
    print(d[cols].round(3).to_string(max_colwidth=60))"
grep -v -i "warn" $OUT/collect.log 2>/dev/null | grep -v "^ " | tail -4

#!/usr/bin/env bash
# Prepared in session 4 for the next session (not run: no device time left). On branch
# nms-matrix: every GPU test (the numerical check now runs on the photos; nms_matrix in the
# pipeline tests), tools/pipeline_probe.py (postprocess time with nms_matrix), five random
# points of h200/sweep_fp16_nhwc re-measured (yolo-sm remeasure), then the
# bench_fast_engines unit w0.5 b16 (goal 4's setting) measured again.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
timeout -s INT 240 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?"
timeout 60 python3 tools/pipeline_probe.py --width 0.5 --batch 16 --reps 10 --out $OUT/pipeline_probe.jsonl > $OUT/probe.log 2>&1; echo "probe rc=$?"
gzip -f $OUT/pipeline_probe_trace.json 2>/dev/null
# goal 3's numerics on the GPU: fp8 vs fp16 boxes after NMS, head error per branch
timeout 80 python3 tools/fp8_boxes.py --width 1.0 --device cuda --out $OUT/fp8_boxes.json > $OUT/fp8_boxes.log 2>&1
echo "fp8_boxes rc=$?"
# issue 4's check: five random points of the shipped fp16 NHWC sweep, drawn from a seed
timeout 90 python3 -m yolo_sm remeasure --dataset h200/sweep_fp16_nhwc --points 5 --seed 20261201 \
  --out $OUT/remeasure.parquet --quiet > $OUT/remeasure.log 2>&1; echo "remeasure rc=$?"
python3 -c "
import pandas as pd; f='data/h200/bench_fast_engines.parquet'; d=pd.read_parquet(f)
redo = (d.width == 0.5) & (d.batch == 16); d[~redo].to_parquet(f); print('dropped', int(redo.sum()), 'rows')"
timeout 100 python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes 0.3 \
  --only bench_fast_engines --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/bench_fast_engines.parquet $OUT/h200/
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
grep -E "passed|failed|FAILED|stream:" $OUT/pytest_gpu.log | tail -8
grep -v -i warn $OUT/probe.log | head -9
tail -7 $OUT/remeasure.log
tail -1 $OUT/fp8_boxes.log
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/bench_fast_engines.parquet'); d=d[(d.width==0.5)&(d.batch==16)]
print(d[['variant','status','median_ms','p99_ms','img_per_s','vs_baseline','pipeline_vs_model_only','nms']].round(3).to_string())"

#!/usr/bin/env bash
# Session 5, device call A: nms_matrix (merged from branch nms-matrix) on the GPU - the pipeline
# probe with both NMS paths side by side, issue 4's five-point re-measure of
# h200/sweep_fp16_nhwc, fp8-vs-fp16 boxes on the GPU, then the GPU tests with the time left.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
timeout 90 python3 tools/pipeline_probe.py --width 0.5 --batch 16 --reps 10 --out $OUT/pipeline_probe.jsonl > $OUT/probe.log 2>&1; echo "probe rc=$?"
gzip -f $OUT/pipeline_probe_trace.json 2>/dev/null
timeout 120 python3 -m yolo_sm remeasure --dataset h200/sweep_fp16_nhwc --points 5 --seed 20261201 \
  --out $OUT/remeasure.parquet > $OUT/remeasure.log 2>&1; echo "remeasure rc=$?"
timeout 80 python3 tools/fp8_boxes.py --width 1.0 --device cuda --out $OUT/fp8_boxes.json > $OUT/fp8_boxes.log 2>&1
echo "fp8_boxes rc=$?"
left=$(( 575 - SECONDS ))
echo "pytest with ${left}s left"
timeout -s INT $(( left - 10 )) python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?"
grep -v -i warn $OUT/probe.log | grep -E "wall|candidates|equal" | head -14
tail -9 $OUT/remeasure.log
tail -3 $OUT/fp8_boxes.log
grep -E "passed|failed|FAILED|Error" $OUT/pytest_gpu.log | tail -10

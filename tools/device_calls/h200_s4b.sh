#!/usr/bin/env bash
# Session 4, device call B: where a frames-to-boxes batch spends its time (tools/pipeline_probe.py),
# the 3-stream pipeline GPU test with its failure text, fp8 plan tuning at batch 64
# (tools/fp8_diag.py) and the fp8-vs-fp16 CUDA graph bench at w1.0 b64, then plan steps.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
timeout 90 python3 tools/pipeline_probe.py --width 0.5 --batch 16 --out $OUT/pipeline_probe.jsonl > $OUT/probe.log 2>&1; echo "probe rc=$?"
gzip -f $OUT/pipeline_probe_trace.json 2>/dev/null
timeout -s INT 70 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short -x tests/test_gpu_profilers.py \
  -k three_streams -rs > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
timeout -s INT 150 python3 tools/fp8_diag.py --width 1.0 --batch 64 --out $OUT/fp8_diag.jsonl > $OUT/fp8_diag.log 2>&1; echo "diag rc=$?"
left=$(( 470 - SECONDS ))
echo "collect with ${left}s left"
if [ $left -gt 60 ]; then
  python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes $(python3 -c "print(round(($left-30)/60,2))") \
    --only trace_compile_w1_b64,sweep_presets --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
  cp -r data/h200 $OUT/h200 && tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
fi
grep -v -i warn $OUT/probe.log | head -60
tail -25 $OUT/pytest_gpu.log
grep -v -i warn $OUT/fp8_diag.log | tail -6
grep -v -i "warn" $OUT/collect.log 2>/dev/null | grep "partial\|missing\|done" | grep "presets\|compile"

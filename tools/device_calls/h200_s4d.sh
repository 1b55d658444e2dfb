#!/usr/bin/env bash
# Session 4, device call D (the last 255 s of device time): tools/pipeline_probe.py again with the
# chunked NMS (what limits the pipeline now), and the trace_compile_w1_b64 plan step.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
timeout 60 python3 tools/pipeline_probe.py --width 0.5 --batch 16 --reps 10 --out $OUT/pipeline_probe.jsonl > $OUT/probe.log 2>&1; echo "probe rc=$?"
gzip -f $OUT/pipeline_probe_trace.json 2>/dev/null
timeout 110 python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes 1.2 \
  --only trace_compile_w1_b64 --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/trace_compile_w1_b64.parquet $OUT/h200/ 2>/dev/null
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
grep -v -i warn $OUT/probe.log | head -12
grep -v -i warn $OUT/probe.log | grep -A16 "Self CUDA %" | tail -15 | cut -c1-60,100-140
grep -v -i "warn" $OUT/collect.log | grep "compile"

#!/usr/bin/env bash
# Session 3, device call C: fp8 diagnosis, changed GPU tests, the fast-engines bench (plan step).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
timeout 70 python3 tools/fp8_diag.py --width 1.0 --out $OUT/fp8_diag.jsonl > $OUT/fp8_diag.log 2>&1; echo "diag rc=$?"
timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_engines.py tests/test_gpu_profilers.py \
  -k "fp8 or triton or pipeline" -rs > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json $OUT/h200/
timeout 440 python3 -m yolo_sm collect --plan data/plans/h200.yaml --out $OUT/h200 --max-minutes 7 \
  --only bench_fast_engines --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
grep -v -i warn $OUT/fp8_diag.log | tail -14
tail -4 $OUT/pytest_gpu.log
grep -v -i "warn" $OUT/collect.log | grep -v "^ " | tail -5

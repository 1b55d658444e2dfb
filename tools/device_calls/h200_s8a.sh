#!/usr/bin/env bash
# Prepared in session 7 for the next session: what the plan still lacks, resumable, run it
# until `--status` says done (each call returns the changed tables in h200.tgz: unpack, copy
# the parquet files and manifest.json into data/h200 before the next call).
# bench_fast_engines: widths 0.75/1.25/1.75 (9 units, ~55 s each); sweep_precision_rest:
# fp32/tf32/fp16/bf16 NCHW at batch 16/128 (128 points; `--status` estimates ~13 min from the
# other sweeps: fp32 eager builds take 40-70 s at batch 64, more at 128).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
# why the fp16 matmul ceiling is 662 TFLOP/s against the ~790 of ../shared/h200/README.md:
# random-normal vs zero operands (power-limited clocks?), randn again after, with the SM clock
timeout -s INT 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_profilers.py -k ceilings \
  > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"; tail -1 $OUT/pytest_gpu.log
timeout 90 python3 -c "
import pandas as pd; from yolo_sm.collect.ceilings import measure_ceilings as m
rows = [m('cuda', n=8192, budget_ms=1000, precisions=('fp16', 'bf16'), fill=f).assign(run=i)
        for i, f in enumerate(['randn', 'zeros', 'randn'])]
d = pd.concat(rows); d = d[d.ceiling.str.startswith('matmul')]
d.to_csv('$OUT/matmul_fill.csv', index=False)
print(d[['run', 'fill', 'ceiling', 'value', 'median_ms', 'iqr_ms', 'sm_clock_end_mhz']].round(1).to_string())"
# eager batch-1 points land at two speeds within one run: the same engine in 6 fresh
# processes, kernels per forward and a digest of their names each (~90 s)
timeout 150 python3 tools/eager_lottery.py --width 1.0 --batch 1 --procs 6 --out $OUT/lottery.jsonl \
  2>&1 | tail -8
# bench first (collect runs --only steps in plan order, so one call each)
run() { left=$(( 585 - SECONDS )); timeout $(( left - 10 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml \
  --out data/h200 --max-minutes $(python3 -c "print(round(($left-25)/60,2))") --only $1 --quiet >> $OUT/collect.log 2>&1; echo "$1 rc=$?"; }
run bench_fast_engines
run sweep_precision_rest
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/bench_fast_engines.parquet $OUT/h200/ \
  && cp data/h200/sweep_precision_rest.parquet $OUT/h200/ 2>/dev/null
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --status | grep -E "bench|precision_rest|left"

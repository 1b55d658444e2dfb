#!/usr/bin/env bash
# Session 3, device call A: fp8 probe, a small bench (compile modes cost), all GPU tests, plan steps.
source tools/h200.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
python3 -c "import torch,cudnn;print(torch.__version__, torch.backends.cudnn.version(), cudnn.backend_version())" 2>&1 | tail -1
timeout 80 python3 tools/fp8_probe.py --out $OUT/fp8_probe.jsonl > $OUT/fp8_probe.log 2>&1; echo "probe rc=$?"
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
( time timeout 190 python3 -m yolo_sm bench --models yolov8:1.0 --batches 1,64 --seconds 1.5 \
  --engines cudagraph/fp16/nhwc,compile/fp16/nhwc,compile:max-autotune-no-cudagraphs/fp16/nhwc \
  --out $OUT/bench_probe.parquet ) > $OUT/bench.log 2>&1; echo "bench rc=$?"
timeout 160 python3 -m pytest -m gpu -q -p no:cacheprovider tests -rs -x --durations=8 > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json $OUT/h200/
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out $OUT/h200 --max-minutes 1.8 \
  --only ceilings,sweep_precision_core --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
echo "== probe"; grep -v -i warn $OUT/fp8_probe.log | tail -40
echo "== bench"; python3 -c "
import pandas as pd; d=pd.read_parquet('$OUT/bench_probe.parquet'); print(d[['width','batch','variant','status','median_ms','img_per_s','vs_baseline','rel_err']].to_string())"
grep -E "real|Error" $OUT/bench.log | tail -5
tail -14 $OUT/pytest_gpu.log; grep -v -i "warn" $OUT/collect.log | tail -6

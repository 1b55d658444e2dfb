#!/usr/bin/env bash
# Foundation checks on the H200 (issue 2): GPU tests, then the acceptance sweep.
source tools/h200.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv | tee $OUT/nvidia_smi.txt
python3 -c "import torch,ultralytics;print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), ultralytics.__version__)"
python3 tools/tf32_probe.py 2>&1 | grep tf32probe
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout ${TEST_TIMEOUT:-200} python3 -m pytest -m gpu -q -x -p no:cacheprovider tests 2>&1 | tee $OUT/pytest_gpu.log | tail -25
fi
/usr/bin/time -v -o $OUT/sweep_time.txt timeout ${SWEEP_TIMEOUT:-575} python3 -m yolo_sm sweep \
  --widths 0.25,0.5,1.0 --precisions fp32,fp16 --layouts nchw,nhwc --backends eager,cudagraph,compile \
  --batches 1,16,64 --device cuda --out $OUT/foundation_sweep.parquet --quiet > $OUT/sweep.log 2>&1
echo "sweep rc=$?"; grep -E "Elapsed|Maximum resident" $OUT/sweep_time.txt
python3 - <<'PY'
import os, pandas as pd
df = pd.read_parquet(os.environ["OUT"] + "/foundation_sweep.parquet")
print(df.groupby(["backend"]).agg(n=("status", "size"), ok=("status", lambda s: (s == "ok").sum()),
      build_s=("build_s", "sum")).to_string())
cols = ["width", "precision", "layout", "backend", "batch", "status", "median_ms", "img_per_s", "rel_err"]
print(df[cols].to_string(index=False, float_format="{:.4g}".format))
PY

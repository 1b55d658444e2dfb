#!/usr/bin/env bash
# One device call on the H200: GPU tests first, then as much of the collection plan as fits.
#   bash tools/h200_session.sh [MINUTES_FOR_COLLECT] [STEP,STEP...]
# The device tool returns at most 8 files, so the dataset folder comes back as one archive,
# $OUT/h200.tgz (unpack it over data/h200 here), beside the logs.
source tools/h200.sh
minutes=${1:-6}
only=${2:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv | tee $OUT/nvidia_smi.txt
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests -rs 2>&1 | tee $OUT/pytest_gpu.log | tail -15
mkdir -p $OUT/h200 && cp data/h200/manifest.json $OUT/h200/ 2>/dev/null
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out $OUT/h200 --max-minutes "$minutes" \
  ${only:+--only "$only"} --quiet 2>&1 | tee $OUT/collect.log | tail -25
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
ls -la $OUT

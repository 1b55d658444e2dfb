#!/usr/bin/env bash
# Set-up on the H200 test machine (no network, no pip index): install the pure wheels carried in
# .whl/ (see ../shared/h200/wheels.sh) into /tmp/site and run the project from source.
# Usage inside a device command:  source tools/h200.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export YOLO_SM_CACHE=/tmp/yolo_sm_cache
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
yolo_sm() { python3 -m yolo_sm "$@"; }

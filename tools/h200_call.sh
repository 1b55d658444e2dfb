#!/usr/bin/env bash
# One device call: selected GPU tests, optionally `yolo-sm profile`, then plan steps.
#   TESTS="tests/test_gpm.py" PROFILE="0.5,1.5" bash tools/h200_call.sh MINUTES STEP,STEP
# Returns $OUT/h200.tgz (datasets), $OUT/profile.tgz (profile folder) and logs.
source tools/h200.sh
minutes=${1:-5}
only=${2:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
if [ -n "${TESTS:-}" ]; then
  timeout 400 python3 -m pytest -m gpu -q -p no:cacheprovider $TESTS -rs 2>&1 | tee $OUT/pytest_gpu.log | tail -4
fi
if [ -n "${PROFILE:-}" ]; then
  timeout 400 python3 -m yolo_sm profile --widths "$PROFILE" --out $OUT/profile 2>&1 | grep -v Warning | tee $OUT/profile.log | tail -12
  tar czf $OUT/profile.tgz -C $OUT profile && rm -rf $OUT/profile
fi
if [ -n "$only" ]; then
  # collect into the repo copy's data/h200 itself: partial steps resume from the shipped tables
  # and the manifest records the command as users run it (--out data/h200)
  python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes "$minutes" \
    --only "$only" --quiet > $OUT/collect.log 2>&1
  grep -v "Warning\|warn" $OUT/collect.log | tail -22
  cp -r data/h200 $OUT/h200
  tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
fi
${EXTRA:-true}

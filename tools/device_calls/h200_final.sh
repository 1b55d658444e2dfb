#!/usr/bin/env bash
# Session 2's last device call: the remaining cheap profiling steps, five sweep points re-measured
# with the same command as the shipped sweep (issue 4's check), then as much of the precision
# sweep as fits. Returns $OUT/h200.tgz and $OUT/remeasure.tgz.
source tools/h200.sh
mkdir -p $OUT/h200 $OUT/remeasure && cp data/h200/manifest.json $OUT/h200/
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out $OUT/h200 --max-minutes 3.2 \
  --only trace_width_b8,gpm_batch_w1,ncu_wide_stack,ncu_resnet101 --quiet > $OUT/collect.log 2>&1
# the points drawn by pandas .sample(5, random_state=20261130) from sweep_fp16_nhwc
i=0
for p in "1.0 eager 1" "1.0 eager 2" "1.0 cudagraph 64" "1.5 eager 8" "1.0 eager 16"; do
  set -- $p; i=$((i+1))
  python3 -m yolo_sm sweep --widths $1 --precisions fp16 --layouts nhwc --backends $2 --batches $3 \
    --budget-ms 200 --device cuda --quiet --out $OUT/remeasure/point$i.parquet 2>&1 | tail -2
done
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out $OUT/h200 --max-minutes 2.3 \
  --only sweep_precision_core --quiet >> $OUT/collect.log 2>&1
grep -v "Warn\|warn" $OUT/collect.log | tail -22
tar czf $OUT/h200.tgz -C $OUT h200 && tar czf $OUT/remeasure.tgz -C $OUT remeasure && rm -rf $OUT/h200 $OUT/remeasure

#!/usr/bin/env bash
# Session 7, second call (after h200_s7a.sh's first call measured sweep_precision_core's widths
# 1.0-2.0 again at ~4.7 s a point: fp32 eager builds at batch 64 take 40-70 s of cuDNN
# autotuning): the last 11 points of sweep_precision_core, then sweep_bf16_nhwc (bf16 and fp16
# NHWC in one run) with the whole call. No drop, no tests (h200_s7a.sh's first call ran them).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
left=$(( 585 - SECONDS ))
timeout $(( left - 10 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 \
  --max-minutes $(python3 -c "print(round(($left-25)/60,2))") \
  --only sweep_precision_core,sweep_bf16_nhwc --quiet > $OUT/collect.log 2>&1
echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/sweep_precision_core.parquet $OUT/h200/ \
  && cp data/h200/sweep_bf16_nhwc.parquet $OUT/h200/ 2>/dev/null
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --status | grep -E "sweep"

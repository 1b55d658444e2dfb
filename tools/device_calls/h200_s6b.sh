#!/usr/bin/env bash
# Prepared in session 5 for the next session (not run: no device time left): issue 4's missing
# sweeps, resumed from the shipped tables (each point ~1-2 s; `collect --status` lists them):
# sweep_precision_core (70 of 192 points missing), sweep_bf16_nhwc (128), sweep_precision_rest
# (128), then sweep_compile (36, torch.compile builds are slow) with the time left. Run it again
# (the same script) until `collect --status` says done; each call returns the changed tables.
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
left=$(( 580 - SECONDS ))
timeout $(( left - 15 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 \
  --max-minutes $(python3 -c "print(round(($left-40)/60,2))") \
  --only sweep_precision_core,sweep_bf16_nhwc,sweep_precision_rest,sweep_compile --quiet > $OUT/collect.log 2>&1
echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/sweep_*.parquet $OUT/h200/
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --status | grep -E "sweep"

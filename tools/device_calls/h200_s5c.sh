#!/usr/bin/env bash
# Session 5, device call C (same code as call B): tools/pipeline_probe.py at w0.5 b16 (postprocess
# with nms_matrix and its Triton fixpoint, its torch-ops fixpoint, torchvision chunks, side by
# side), then the bench_fast_engines units call B had no time for (widths 2.0 and 0.25), resumed
# into call B's table (carried in .dev/h200).
source tools/h200.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv > $OUT/nvidia_smi.txt
cp .dev/h200/bench_fast_engines.parquet .dev/h200/manifest.json data/h200/
timeout 75 python3 tools/pipeline_probe.py --width 0.5 --batch 16 --reps 10 --out $OUT/pipeline_probe.jsonl > $OUT/probe.log 2>&1; echo "probe rc=$?"
gzip -f $OUT/pipeline_probe_trace.json 2>/dev/null
left=$(( 588 - SECONDS ))
echo "collect with ${left}s left"
timeout $(( left - 10 )) python3 -m yolo_sm collect --plan data/plans/h200.yaml --out data/h200 --max-minutes $(python3 -c "print(round(($left-30)/60,2))") \
  --only bench_fast_engines --quiet > $OUT/collect.log 2>&1; echo "collect rc=$?"
mkdir -p $OUT/h200 && cp data/h200/manifest.json data/h200/bench_fast_engines.parquet $OUT/h200/
tar czf $OUT/h200.tgz -C $OUT h200 && rm -rf $OUT/h200
grep -v -i warn $OUT/probe.log | grep -E "wall|candidates|boxes ==" | head -14
python3 -c "
import pandas as pd; d=pd.read_parquet('data/h200/bench_fast_engines.parquet'); d=d[d.width.isin([2.0,0.25])]
print(d[['width','batch','variant','status','median_ms','img_per_s','vs_baseline','pipeline_vs_model_only','unit_s']].round(3).to_string())"

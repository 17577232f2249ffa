#!/usr/bin/env bash
# session 51, not run (too little device time left): for the next call that gets an H200 (carry .dev packed by
# pack_variants.sh or pack_device.sh with bench_model and hearth): issue7 and issue6 on HEAD, only if an H200 came (HEAD's bench_model and hearth are packed)
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s51-run3.log

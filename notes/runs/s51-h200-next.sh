#!/usr/bin/env bash
# session 51, not run (too little device time was left): issue7 and issue6 on HEAD, for the next call that
# gets an H200; on an H100 it exits at once. Here: make -j2 all build/bench/cuda/bench_model, then
# tools/bench/pack_device.sh (.dev/bin.tar.xz with bench_model and hearth); there (carry [".dev"]):
#   bash notes/runs/s51-h200-next.sh
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s51-h200.log

#!/usr/bin/env bash
# session 51, call 2: resid-async and spin against HEAD's decode_layers (variants); on an H200 also issue7 and issue6 on HEAD
cd "$(dirname "$0")/.."
suites=variants
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && suites="variants issue7 issue6"
bash tools/bench/device_run.sh $suites 2>&1 | tee $OUT/s51-run2.log

#!/usr/bin/env bash
# session 51, call 1: three decode_layers patches against HEAD (variants); on an H200 also issue7 and issue6 on HEAD
cd "$(dirname "$0")/.."
export VARIANT_ENVS="prefetch:HEARTH_DL_PREFETCH=264 prefetch:HEARTH_DL_PREFETCH=528 tags:HEARTH_DL_PREFETCH=528"
suites=variants
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && suites="variants issue7 issue6"
bash tools/bench/device_run.sh $suites 2>&1 | tee $OUT/s51-run1.log

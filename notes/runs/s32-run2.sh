#!/bin/bash
# s32-run2: the whole test_cuda on 0a3f1c5 (the CPU reference after this
# session's CPU changes; no CUDA change), the default model carried in three
# parts (tools/bench/split_model.sh; this is the third call).
set -u
mkdir -p "${OUT:-/tmp/out}"
bash tools/bench/device_run.sh tests 2>&1 | tee "${OUT:-/tmp/out}/s32-run2.log"

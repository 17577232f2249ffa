#!/bin/bash
# s31-run1: issue 7's table on f955c5f with its peers in the same call:
# bench_model on the 8B shape (BF16, Q8_0, Q4_0 + Q6_K head), then llama.cpp
# (llama-bench, llama-batched-bench 128/128) and PyTorch on the same files.
set -u
mkdir -p "${OUT:-/tmp/out}"
bash tools/bench/device_run.sh issue7 peer 2>&1 | tee "${OUT:-/tmp/out}/s31-run1.log"

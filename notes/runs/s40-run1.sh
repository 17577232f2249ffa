#!/bin/bash
# s40-run1: issues 7 and 6 on 0959bdc's binaries (no GPU path changed since
# s39) with their peers in one call: bench_model on the 8B shape (BF16, Q8_0,
# Q4_0 + Q6_K head), llama.cpp and PyTorch on the same files; saturation
# (512 x 1000/1000, e4m3 KV), the streams table, a repeated 4000-token prompt
# against cold.
set -u
mkdir -p "${OUT:-/tmp/out}"
{
bash tools/bench/device_run.sh issue7 peer issue6 streams
echo "## $(date +%T) hearth bench --repeat --prompt 4000 --gen 16 --reps 6"
timeout 120 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --repeat --prompt 4000 --gen 16 --reps 6 2>&1 | grep -vE '^\s*$' | tail -12
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s40-run1.log"

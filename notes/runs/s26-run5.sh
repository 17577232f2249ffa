#!/bin/bash
# s26-run5: the GEMMs on random values against a constant (power under the
# 700 W cap), the SM clock sampled meanwhile; then test_cuda after v51.
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && tar -C /tmp/b -xJf .dev/gemm.tar.xz
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 250 > /tmp/smi.log 2>&1 &
SMI=$!
for v in "" --random "" --random; do
  echo "## $(date +%T.%N) bench_gemm --rows 512,8192 --reps 24 --copies 16 --algos 1 $v"
  timeout 150 /tmp/b/bench_gemm --rows 512,8192 --reps 24 --copies 16 --algos 1 $v
done
echo "## $(date +%T.%N) end"
kill $SMI
awk -F', ' '{split($1,t," "); print t[2], $2, $3, $4}' /tmp/smi.log | awk 'NR % 4 == 0'
echo "## $(date +%T) test_cuda"
timeout 400 /tmp/b/test_cuda 2>&1 | grep -vE "^ok |^  layer |^  cuda (mistral|llama|qwen)" | tail -30
echo "## $(date +%T) done"

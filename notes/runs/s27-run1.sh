#!/bin/bash
# s27-run1: the repeated 4000-token prompt's TTFT (s26-run7: 7.8% and 12.7%
# of cold): six reps, then two under the CUPTI trace, the warm step's kernels.
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1
echo "## $(date +%T) hearth bench --repeat --prompt 4000 --gen 16 --reps 6"
timeout 120 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --repeat --prompt 4000 --gen 16 --reps 6 2>&1 | grep "^prefix"
echo "## $(date +%T) the same, --reps 2, traced"
LD_LIBRARY_PATH=$PWD/.dev/lib CUDA_INJECTION64_PATH=$PWD/.dev/lib/libhearth_trace.so HEARTH_TRACE_OUT=/tmp/tr.csv \
  timeout 120 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --repeat --prompt 4000 --gen 16 --reps 2 2>&1 | grep "^prefix"
ls -la /tmp/tr.csv
timeout 60 python3 tools/prof/timeline.py /tmp/tr.csv --gap 200 --window 0 --phases 3 2>&1 | head -80
cp /tmp/tr.csv $OUT/ 2>/dev/null; xz -T4 $OUT/tr.csv
echo "## $(date +%T) done"

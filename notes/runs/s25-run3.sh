#!/bin/bash
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv,noheader
timeout 60 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1 &
echo "## $(date +%T) test_cuda"
timeout 300 /tmp/b/test_cuda 2>&1 | grep -vE "^ok " | tail -25
wait
echo "## $(date +%T) saturation, default budget"
timeout 150 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 2>&1 | grep -v "weights to cuda"
echo "## $(date +%T) one stream, default budget"
timeout 100 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 512 --gen 128 2>&1 | grep -v "weights to cuda"
echo "## $(date +%T) done"

#!/bin/bash
# s26-run3: the saturation run's profile table (s26-run2 filtered it out)
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1
echo "## $(date +%T) saturation --profile"
timeout 240 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 --profile 2>&1 | grep -v "weights to cuda" | head -120
echo "## $(date +%T) done"

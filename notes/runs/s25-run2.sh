#!/bin/bash
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
echo "## $(date +%T) bench_attn fp8 (v48b)"
timeout 60 /tmp/b/bench_attn --kv fp8 --T 2048,512@1536,4096,1100@300 --reps 21 --variants flash 2>&1
timeout 60 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1
echo "## $(date +%T) bench_model fp8 prefill 2048 profile (v48b)"
timeout 120 /tmp/b/bench_model /tmp/l8b-bf16.gguf --kv fp8 --prefill 2048 --gen 8 --profile 2>&1 | grep -A8 "profile: prefill"
for b in 2048 8192 4096; do
echo "## $(date +%T) saturation --batch $b"
timeout 150 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 --batch $b 2>&1 | grep -v "weights to cuda"
done
echo "## $(date +%T) done"

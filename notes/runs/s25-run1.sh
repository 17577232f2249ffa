#!/bin/bash
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
echo "## $(date +%T) focused tests"
timeout 90 /tmp/b/test_cuda cuda_attention_flash 2>&1 | tail -12
echo "## $(date +%T) bench_attn fp8"
timeout 60 /tmp/b/bench_attn --kv fp8 --T 2048,512@1536,4096,1100@300 --reps 21 --variants flash,flash-fa2 2>&1
echo "## $(date +%T) bench_attn f16"
timeout 60 /tmp/b/bench_attn --kv f16 --T 2048,512@1536,4096 --reps 21 --variants flash 2>&1
echo "## $(date +%T) model"
timeout 60 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1
for wg in 1 0; do
echo "## $(date +%T) bench_model fp8 prefill 2048 profile WG=$wg"
HEARTH_ATTN_WG=$wg timeout 120 /tmp/b/bench_model /tmp/l8b-bf16.gguf --kv fp8 --prefill 2048 --profile 2>&1 | grep -vE "^\s*$" | head -60
done
echo "## $(date +%T) bench_model fp8 prefill 512,2048,8192"
for wg in 1 0; do HEARTH_ATTN_WG=$wg timeout 120 /tmp/b/bench_model /tmp/l8b-bf16.gguf --kv fp8 --prefill 512,2048,8192 --gen 16 2>&1 | grep -E "prefill|decode"; done
echo "## $(date +%T) done"

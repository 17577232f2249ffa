#!/bin/bash
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
(timeout 90 python3 tools/bench/make_llama_gguf.py /tmp/l1b.gguf --type bf16 --hidden 2048 --heads 32 --kv-heads 8 --ffn 8192 --layers 16 --vocab 128256 2>&1 | tail -1) > /tmp/gen.log 2>&1 &
echo "## $(date +%T) focused tests"
timeout 150 /tmp/b/test_cuda cuda_attention_flash 2>&1 | tail -8
for h in 32/8 14/2 32/32; do
echo "## $(date +%T) bench_attn hd 64 heads $h f16"
timeout 60 /tmp/b/bench_attn --hd 64 --heads $h --kv f16 --T 2048,512@1536,4096,1100@300 --reps 21 --variants flash,flash-fa2 2>&1
done
echo "## $(date +%T) bench_attn hd 128 32/8 f16 (unchanged path)"
timeout 60 /tmp/b/bench_attn --kv f16 --T 2048,4096 --reps 21 --variants flash 2>&1
wait; cat /tmp/gen.log
for wg in 1 0; do
echo "## $(date +%T) bench_model l1b WG=$wg"
HEARTH_ATTN_WG=$wg timeout 120 /tmp/b/bench_model /tmp/l1b.gguf --prefill 512,2048,8192 --gen 16 --reps 2 2>&1 | grep -E "prefill|decode"
HEARTH_ATTN_WG=$wg timeout 120 /tmp/b/bench_model /tmp/l1b.gguf --prefill 2048 --gen 16 --profile 2>&1 | grep -A16 "profile: prefill" | grep -E "attention|total|profile"
done
echo "## $(date +%T) done"

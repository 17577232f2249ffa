#!/bin/bash
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
(timeout 90 python3 tools/bench/make_llama_gguf.py /tmp/qwen7.gguf --type bf16 --hidden 3584 --heads 28 --kv-heads 4 --ffn 18944 --layers 28 --vocab 152064 2>&1 | tail -1
 timeout 90 python3 tools/bench/make_llama_gguf.py /tmp/llama2.gguf --type bf16 --hidden 4096 --heads 32 --kv-heads 32 --ffn 11008 --layers 32 --vocab 32000 2>&1 | tail -1) > /tmp/gen.log 2>&1 &
echo "## $(date +%T) focused tests"
timeout 120 /tmp/b/test_cuda cuda_attention_flash 2>&1 | tail -8
for h in 28/4 32/32; do for kv in f16 fp8; do
echo "## $(date +%T) bench_attn heads $h kv $kv"
timeout 60 /tmp/b/bench_attn --heads $h --kv $kv --T 2048,512@1536,4096,1100@300 --reps 21 --variants flash,flash-fa2 2>&1
done; done
wait; cat /tmp/gen.log
for m in qwen7 llama2; do for wg in 1 0; do
echo "## $(date +%T) bench_model $m WG=$wg"
HEARTH_ATTN_WG=$wg timeout 120 /tmp/b/bench_model /tmp/$m.gguf --prefill 512,2048,8192 --gen 16 --reps 2 2>&1 | grep -E "prefill|decode"
HEARTH_ATTN_WG=$wg timeout 120 /tmp/b/bench_model /tmp/$m.gguf --prefill 2048 --gen 16 --profile 2>&1 | grep -A16 "profile: prefill" | grep -E "attention|total|profile"
done; done
echo "## $(date +%T) done"

#!/bin/bash
# s26-run1: the two session-25 patches (e4m3 V widened by the consumers; a
# sliding window in the wgmma kernel) against HEAD, and where a saturation
# step's time goes (--profile).
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b /tmp/v && tar -C /tmp/b -xJf .dev/bin.tar.xz && tar -C /tmp/v -xJf .dev/var.tar.xz
for d in head e8v win; do ln -sfn /tmp/b/lib /tmp/v/$d/lib; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
(timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1) > /tmp/gen.log 2>&1 &
for d in head e8v win; do
  echo "## $(date +%T) $d: test_cuda cuda_attention_flash"
  timeout 150 /tmp/v/$d/test_cuda cuda_attention_flash 2>&1 | tail -4
done
for kv in fp8 f16; do
  for d in head e8v win head; do
    echo "## $(date +%T) $d: bench_attn --kv $kv"
    timeout 60 /tmp/v/$d/bench_attn --kv $kv --T 2048,512@1536,4096,1100@300 --reps 21 --variants flash 2>&1 | grep -v "^#"
  done
done
for d in head win; do
  echo "## $(date +%T) $d: bench_attn --window 1024 f16"
  timeout 60 /tmp/v/$d/bench_attn --kv f16 --window 1024 --T 2048,512@1536,4096 --reps 21 --variants flash 2>&1 | grep -v "^#"
done
wait; cat /tmp/gen.log
echo "## $(date +%T) saturation --profile"
timeout 240 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 --profile 2>&1 | tail -60
echo "## $(date +%T) done"

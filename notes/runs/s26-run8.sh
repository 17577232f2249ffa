#!/bin/bash
# s26-run8: odd query groups over e4m3 caches in the wgmma kernel (SPLIT +
# E8, the tile's warpgroup widening its V): the flash tests, and the times
# against the FA2 kernel.
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
echo "## $(date +%T) test_cuda cuda_attention_flash"
timeout 150 /tmp/b/test_cuda cuda_attention_flash 2>&1 | tail -4
for h in 28/4 32/32 32/8; do
  echo "## $(date +%T) bench_attn --kv fp8 --heads $h"
  timeout 60 /tmp/b/bench_attn --kv fp8 --heads $h --T 2048,512@1536,4096,1100@300 --reps 21 --variants flash,flash-fa2 2>&1 | grep -v "^#"
done
echo "## $(date +%T) done"

#!/bin/bash
# s26-run7: the sliding window in the wgmma kernel as its own instances
# (WIN): the flash tests, windowed and plain times (against s26-run1's);
# then issue 6's stream table and the repeated-prompt TTFT.
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
(timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1) > /tmp/gen.log 2>&1 &
echo "## $(date +%T) test_cuda cuda_attention_flash"
timeout 150 /tmp/b/test_cuda cuda_attention_flash 2>&1 | tail -4
for kv in f16 fp8; do
  for w in 0 1024; do
    echo "## $(date +%T) bench_attn --kv $kv --window $w"
    timeout 60 /tmp/b/bench_attn --kv $kv --window $w --T 2048,512@1536,4096,1100@300 --reps 21 --variants flash,flash-fa2 2>&1 | grep -v "^#"
  done
done
wait; cat /tmp/gen.log
bash tools/bench/device_run.sh streams 2>&1 | grep -v "^NVIDIA"
echo "## $(date +%T) hearth bench --repeat --prompt 4000"
timeout 120 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --repeat --prompt 4000 --gen 16 --reps 2 2>&1 | grep "^prefix"
echo "## $(date +%T) done"

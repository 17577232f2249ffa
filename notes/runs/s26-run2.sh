#!/bin/bash
# s26-run2: where a saturation run's device time goes (--profile, the head
# of the table), the same run without the profile (v51), and the decode
# rows' attention alone at the saturation shape.
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
(timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1) > /tmp/gen.log 2>&1 &
for kv in fp8 f16; do
  echo "## $(date +%T) bench_attn --kv $kv decode rows"
  timeout 60 /tmp/b/bench_attn --kv $kv --T 512x1500,256x1500,512x1000,512x2000 --reps 21 --variants flash 2>&1 | grep -v "^#"
done
wait; cat /tmp/gen.log
echo "## $(date +%T) saturation"
timeout 200 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 2>&1 | grep "^engine"
echo "## $(date +%T) saturation --profile"
timeout 240 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 --profile 2>&1 | grep -v "^  " | head -90
echo "## $(date +%T) done"

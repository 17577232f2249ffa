#!/bin/bash
# s26-run6: saturation as one wave (512 requests through 512 slots) and as a
# steady state (1536 requests through 512 slots, the next ones queued:
# trtllm-bench's method), one call.
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1
for n in 512 1536; do
  echo "## $(date +%T) hearth bench --parallel 512 --requests $n --prompt 1000 --gen 1000 --kv-type fp8"
  timeout 240 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel 512 --requests $n --kv-type fp8 2>&1 | grep "^engine"
done
echo "## $(date +%T) done"

#!/bin/bash
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
timeout 60 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1
for n in 64 256; do for b in 8192 2048; do
echo "## $(date +%T) $n streams 1000/1000 f16 KV --batch $b"
timeout 70 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel $n --batch $b 2>&1 | grep -E "^engine \|" | head -3
done; done
echo "## $(date +%T) done"

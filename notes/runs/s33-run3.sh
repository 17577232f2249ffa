#!/bin/bash
# s33-run3: the CPU attention on the GPU host's Xeon (16 cores), three CPU
# builds (make CUDA=0 on the dev VM, .dev/cpu3.tar.xz): the parent's code
# (4ecfd1d), segments of 512 (f09e884 = 9bd2925's code, s33-run2's "new")
# and b6b5bb7 (room for a whole chunk's partials: does s33-run2's 2-12%
# prefill loss go?), alternated, two rounds, on a random-weight model of
# the default model's shape in Q4_0 (30 layers, hidden 576, 9 / 3 heads).
set -u
mkdir -p "${OUT:-/tmp/out}"
{
mkdir -p /tmp/c3 && tar -C /tmp/c3 -xJf .dev/cpu3.tar.xz
export LD_LIBRARY_PATH=/tmp/c3/lib CUDA_VISIBLE_DEVICES=
M=/tmp/smol-q4_0.gguf
timeout 120 python3 tools/bench/make_llama_gguf.py $M --type q4_0 --layers 30 --hidden 576 --ffn 1536 \
  --heads 9 --kv-heads 3 --vocab 49152 >/dev/null 2>&1
ls -la $M
for r in 1 2; do
  for p in 4000 2000; do
    for b in parent seg new; do
      echo "r$r t16 p$p $b: $(timeout 120 /tmp/c3/hearth-$b bench $M --device cpu --threads 16 --prompt $p --gen 64 2>&1 | grep -oE "prefill $p: [0-9.]+ tok/s \| decode 64: [0-9.]+")"
    done
  done
  for b in parent seg new; do
    echo "r$r streams 4 x 2000 t16 $b: $(timeout 120 /tmp/c3/hearth-$b bench $M --device cpu --threads 16 --parallel 4 --prompt 2000 --gen 128 2>&1 | grep -oE 'output [0-9.]+ tok/s')"
  done
done
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s33-run3.log"

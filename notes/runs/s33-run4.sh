#!/bin/bash
# s33-run4: the CPU backend after long prompts on the GPU host's Xeon (16
# cores) beside llama.cpp's CPU backend: 1605f05 built with make CUDA=0 on
# the dev VM (.dev/cpu1.tar.xz), under its best ISA (AVX-512) and under
# HEARTH_CPU_ISA=avx2 (the fair pair: the peer suite's llama.cpp 0c1e570 is
# built GGML_NATIVE=OFF, AVX2), against llama-bench -ngl 0 with no GPU
# visible, on a random Q4_0 model of the default model's shape (30 layers,
# 576, 9 / 3 heads), 16 threads, two rounds: decode 64 after 4000 and 2000
# tokens, prefill of 4000.
set -u
mkdir -p "${OUT:-/tmp/out}"
{
mkdir -p /tmp/c1 /tmp/lc && tar -C /tmp/c1 -xJf .dev/cpu1.tar.xz && tar -C /tmp/lc -xJf .dev/llama.tar.xz
export CUDA_VISIBLE_DEVICES=
M=/tmp/smol-q4_0.gguf
timeout 120 python3 tools/bench/make_llama_gguf.py $M --type q4_0 --layers 30 --hidden 576 --ffn 1536 \
  --heads 9 --kv-heads 3 --vocab 49152 >/dev/null 2>&1
ls -la $M
L="env LD_LIBRARY_PATH=/tmp/lc/lib timeout 150 /tmp/lc/bin/llama-bench -m $M -ngl 0 -t 16 -r 1"
for r in 1 2; do
  for p in 4000 2000; do
    echo "r$r p$p hearth avx512: $(LD_LIBRARY_PATH=/tmp/c1/lib timeout 120 /tmp/c1/hearth bench $M --threads 16 --prompt $p --gen 64 2>&1 | grep -oE "prefill $p: [0-9.]+ tok/s \| decode 64: [0-9.]+")"
    echo "r$r p$p hearth avx2: $(HEARTH_CPU_ISA=avx2 LD_LIBRARY_PATH=/tmp/c1/lib timeout 120 /tmp/c1/hearth bench $M --threads 16 --prompt $p --gen 64 2>&1 | grep -oE "prefill $p: [0-9.]+ tok/s \| decode 64: [0-9.]+")"
    echo "r$r p$p llama.cpp: $($L -p 0 -n 64 -d $p 2>&1 | grep -oE "tg64 @ d$p .*|error.*")"
  done
  echo "r$r llama.cpp: $($L -p 4000 -n 0 2>&1 | grep -oE "pp4000 .*|error.*")"
done
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s33-run4.log"

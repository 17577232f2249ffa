#!/bin/bash
# s46-cpu-avx2-bf16: AVX2 float prefill in 2 x 3 tiles over L2-sized row blocks against the session's start
# (/tmp/hearth-s46base, a56ed8f) and llama.cpp 0c1e570 built for AVX2 only (/tmp/lavx2), alternated, two rounds,
# 2 threads, HEARTH_CPU_ISA=avx2, the 16-layer 2048-wide BF16 llama of session 45 (make_llama_gguf.py
# /tmp/m-bf16.gguf --type bf16 --layers 16 --hidden 2048 --ffn 5632 --heads 32 --kv-heads 4 --vocab 32000).
set -u
m=/tmp/m-bf16.gguf
for r in 1 2; do
  for h in /tmp/hearth-s46base ./hearth; do
    echo "r$r $h avx2: $(HEARTH_CPU_ISA=avx2 $h bench $m --prompt 128 --gen 16 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 128: [0-9.]+ tok/s \| decode 16: [0-9.]+')"
  done
  echo "r$r llama.cpp avx2: $(/tmp/lavx2/build/bin/llama-bench -t 2 -r 2 -m $m -p 128 -n 16 2>&1 | grep -oE '(pp128|tg16) .*' | tr '\n' ' ')"
done

#!/bin/bash
# s47-cpu-bf16: AVX-512 float prefill over L2-sized row blocks (the AVX2 path's of session 46) against the
# session's start (/tmp/hearth-s47base, 3cef0e3's tree) and llama.cpp 0c1e570 built for this CPU (GGML_NATIVE,
# llama-bench from tools/bench/build_llamacpp_cpu.sh's build tree), alternated, three rounds, 2 threads, the
# 16-layer 2048-wide BF16 llama of session 45 (make_llama_gguf.py /tmp/m-bf16.gguf --type bf16 --layers 16
# --hidden 2048 --ffn 5632 --heads 32 --kv-heads 4 --vocab 32000).
set -u
m=/tmp/m-bf16.gguf
LB=build/llamacpp-cpu/bin/llama-bench # tools/bench/build_llamacpp_cpu.sh (run here from its build tree)
for r in 1 2 3; do
  for h in /tmp/hearth-s47base ./hearth; do
    echo "r$r $h: $($h bench $m --prompt 128 --gen 16 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 128: [0-9.]+ tok/s \| decode 16: [0-9.]+')"
  done
  echo "r$r llama.cpp: $($LB -t 2 -r 2 -m $m -p 128 -n 16 2>&1 | grep -oE '(pp128|tg16) .*' | tr '\n' ' ')"
done

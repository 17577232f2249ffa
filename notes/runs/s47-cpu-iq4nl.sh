#!/bin/bash
# s47-cpu-iq4nl: AVX-512 iq4_nl prefill through q8_0's panels against the binary before it (/tmp/hearth-s47b,
# a03663d's tree) and llama.cpp 0c1e570 built for this CPU (GGML_NATIVE), alternated, three rounds, 2 threads,
# the 16-layer 2048-wide IQ4_NL llama of session 45 (make_llama_gguf.py /tmp/m-iq4_nl.gguf --type iq4_nl
# --output-type q6_K --layers 16 --hidden 2048 --ffn 5632 --heads 32 --kv-heads 4 --vocab 32000).
set -u
m=/tmp/m-iq4_nl.gguf
LB=build/llamacpp-cpu/bin/llama-bench # tools/bench/build_llamacpp_cpu.sh
for r in 1 2 3; do
  for h in /tmp/hearth-s47b ./hearth; do
    echo "r$r $h: $($h bench $m --prompt 128 --gen 16 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 128: [0-9.]+ tok/s \| decode 16: [0-9.]+')"
  done
  echo "r$r llama.cpp: $($LB -t 2 -r 2 -m $m -p 128 -n 16 2>&1 | grep -oE '(pp128|tg16) .*' | tr '\n' ' ')"
done

#!/bin/bash
# s47-cpu-q5: AVX-512 q5_0 / q5_1 prefill through q4_0's / q4_1's panels against the binary before it
# (/tmp/hearth-s47c, 01cd3d4's tree) and llama.cpp 0c1e570 built for this CPU (GGML_NATIVE), alternated, two
# rounds, 2 threads, the 16-layer 2048-wide Q5_0 / Q5_1 llamas of session 45 (make_llama_gguf.py --type q5_0 /
# q5_1 --output-type q6_K --layers 16 --hidden 2048 --ffn 5632 --heads 32 --kv-heads 4 --vocab 32000).
set -u
LB=build/llamacpp-cpu/bin/llama-bench # tools/bench/build_llamacpp_cpu.sh
for m in /tmp/m-q5_0.gguf /tmp/m-q5_1.gguf; do
  for r in 1 2; do
    for h in /tmp/hearth-s47c ./hearth; do
      echo "$m r$r $h: $($h bench $m --prompt 128 --gen 16 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 128: [0-9.]+ tok/s \| decode 16: [0-9.]+')"
    done
    echo "$m r$r llama.cpp: $($LB -t 2 -r 2 -m $m -p 128 -n 16 2>&1 | grep -oE '(pp128|tg16) .*' | tr '\n' ' ')"
  done
done

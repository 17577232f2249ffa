#!/bin/bash
# s46-cpu-avx2: AVX2 prefill of q3_K / q2_K / iq4_xs through 8-row panels (dd13cf9) against the session's
# start (/tmp/hearth-s46base, a56ed8f) and llama.cpp 0c1e570 built for AVX2 only (/tmp/lavx2: GGML_NATIVE=OFF,
# GGML_AVX2/FMA/F16C/BMI2=ON, GGML_AVX512=OFF), alternated, two rounds, 2 threads, HEARTH_CPU_ISA=avx2; the
# 16-layer 2048-wide files of session 44 (make_llama_gguf.py --type T --layers 16 --hidden 2048 --ffn 5632
# --heads 32 --kv-heads 4 --vocab 32000, a q6_K head).
set -u
L="/tmp/lavx2/build/bin/llama-bench -t 2 -r 2"
for m in /tmp/m-q3_K.gguf /tmp/m-q2_K.gguf /tmp/m-iq4_xs.gguf; do
  for r in 1 2; do
    for h in /tmp/hearth-s46base ./hearth; do
      echo "$m r$r $h avx2: $(HEARTH_CPU_ISA=avx2 $h bench $m --prompt 128 --gen 16 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 128: [0-9.]+ tok/s \| decode 16: [0-9.]+')"
    done
    echo "$m r$r llama.cpp avx2: $($L -m $m -p 128 -n 0 2>&1 | grep -oE 'pp128 .*')"
  done
done

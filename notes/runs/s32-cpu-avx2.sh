#!/bin/bash
# s32-cpu-avx2: the AVX2 path end to end on this Zen 4 VM: ./hearth under
# HEARTH_CPU_ISA=avx2 (e86bec0) against llama.cpp 0c1e570 built for AVX2
# only (/tmp/lavx2: GGML_NATIVE=OFF, GGML_AVX2/FMA/F16C/BMI2=ON,
# GGML_AVX512=OFF), alternated, two rounds, 2 threads: prefill 512 and
# decode 128 after 512 on the default model and the 16-layer Q4_0 / Q8_0 /
# Q4_K_M models.
set -u
L="env LD_LIBRARY_PATH=/tmp/lavx2/bin /tmp/lavx2/bin/llama-bench -t 2 -r 2"
for m in models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/small-q4_0.gguf /tmp/small-q8_0.gguf /tmp/small-q4km.gguf; do
  for r in 1 2; do
    echo "$m r$r hearth avx2: $(HEARTH_CPU_ISA=avx2 ./hearth bench $m --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 512: [0-9.]+ tok/s \| decode 128: [0-9.]+')"
    echo "$m r$r llama.cpp avx2: $($L -m $m -p 512 -n 0 2>&1 | grep -oE 'pp512 .*') | $($L -m $m -p 0 -n 128 -d 512 2>&1 | grep -oE 'tg128 @ d512 .*')"
  done
done

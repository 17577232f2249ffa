#!/bin/bash
# s32-cpu-final: this session's CPU tree (./hearth, the CUDA build, as make
# builds it where nvcc exists) against its parent 506e6ba (/tmp/wt-parent,
# make CUDA=0) and llama.cpp 0c1e570 (/tmp/lcpu, GGML_NATIVE=ON), alternated,
# two rounds, 2 threads: prefill 512 and decode 128 after 512 on the default
# model and the 16-layer Q4_0 / Q8_0 / Q4_K_M models; the engine at 1 / 4 /
# 16 streams of 128 / 128 on the default model; decode after 4000 tokens.
set -u
L="env LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin"
D=models/SmolLM2-135M-Instruct.Q4_1.gguf
for m in $D /tmp/small-q4_0.gguf /tmp/small-q8_0.gguf /tmp/small-q4km.gguf; do
  for r in 1 2; do
    for b in /tmp/wt-parent/hearth ./hearth; do
      echo "$m r$r $b: $($b bench $m --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 512: [0-9.]+ tok/s \| decode 128: [0-9.]+')"
    done
    echo "$m r$r llama.cpp: $($L/llama-bench -t 2 -r 2 -m $m -p 512 -n 0 2>&1 | grep -oE 'pp512 .*') | $($L/llama-bench -t 2 -r 2 -m $m -p 0 -n 128 -d 512 2>&1 | grep -oE 'tg128 @ d512 .*')"
  done
done
for r in 1 2; do
  for n in 1 4 16; do
    echo "streams $n r$r hearth: $(./hearth bench $D --parallel $n --prompt 128 --gen 128 --threads 2 2>&1 | grep -oE 'output [0-9.]+ tok/s \| TTFT p50 [0-9.]+ s, p99 [0-9.]+ s')"
  done
  echo "streams r$r llama-batched-bench:"
  $L/llama-batched-bench -m $D -t 2 -tb 2 -c 8192 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,4,16 2>&1 | grep -E "^\|"
done
for r in 1 2; do
  echo "long r$r hearth: $(./hearth bench $D --prompt 4000 --gen 64 --threads 2 --reps 1 2>&1 | grep -oE 'prefill 4000: [0-9.]+ tok/s \| decode 64: [0-9.]+')"
  echo "long r$r llama.cpp: $($L/llama-bench -t 2 -r 1 -m $D -p 0 -n 64 -d 4000 2>&1 | grep -oE 'tg64 @ d4000 .*')"
done

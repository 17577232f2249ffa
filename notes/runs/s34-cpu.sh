#!/bin/bash
# s34-cpu: issue 6's CPU figures on this session's tree against llama.cpp
# 0c1e570 (/tmp/lcpu, GGML_NATIVE=ON), alternated, two rounds, 2 threads, on
# the default model: the engine at 1 / 4 / 16 streams of 128 / 128 against
# llama-batched-bench, and decode after 512 and 4000 prompt tokens against
# llama-bench. No CPU kernel changed this session; this re-measures.
set -u
L="env LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin"
D=models/SmolLM2-135M-Instruct.Q4_1.gguf
for r in 1 2; do
  for n in 1 4 16; do
    echo "streams $n r$r hearth: $(./hearth bench $D --parallel $n --prompt 128 --gen 128 --threads 2 2>&1 | grep -oE 'output [0-9.]+ tok/s \| TTFT p50 [0-9.]+ s, p99 [0-9.]+ s')"
  done
  echo "streams r$r llama-batched-bench:"
  $L/llama-batched-bench -m $D -t 2 -tb 2 -c 16384 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,4,16 2>&1 | grep -E "^\|"
  for p in 512 4000; do
    echo "decode after $p r$r hearth: $(./hearth bench $D --prompt $p --gen 64 --threads 2 2>&1 | grep -oE "prefill $p: [0-9.]+ tok/s \| decode 64: [0-9.]+")"
    echo "decode after $p r$r llama.cpp: $($L/llama-bench -t 2 -r 1 -m $D -p 0 -n 64 -d $p 2>&1 | grep -oE "tg64 @ d$p .*")"
  done
done

#!/bin/bash
# s33-cpu: the CPU attention's changes of session 33 (head-block KV layout,
# the next chunk asked for ahead, segments of 512 positions) end to end:
# ./hearth (the CUDA build, as make builds it where nvcc exists) against the
# parent's code (/tmp/wt-a = 4ecfd1d's, make CUDA=0) and llama.cpp 0c1e570
# (/tmp/lcpu, GGML_NATIVE=ON), alternated, two rounds, 2 threads, on the
# default model: decode after 4000 and 2000 prompt tokens, the engine at
# 1 / 4 / 16 streams of 128 / 128 and 4 streams of 2000 / 128, and prefill
# 512 + decode 128 (where the attention is short) as a check.
set -u
L="env LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin"
D=models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -s $D ] || D=/tmp/ci/main/models/SmolLM2-135M-Instruct.Q4_1.gguf
for r in 1 2; do
  for p in 4000 2000; do
    for b in /tmp/wt-a/hearth ./hearth; do
      echo "long $p r$r $b: $($b bench $D --prompt $p --gen 64 --threads 2 2>&1 | grep -oE "prefill $p: [0-9.]+ tok/s \| decode 64: [0-9.]+")"
    done
    echo "long $p r$r llama.cpp: $($L/llama-bench -t 2 -r 1 -m $D -p 0 -n 64 -d $p 2>&1 | grep -oE "tg64 @ d$p .*")"
  done
done
for r in 1 2; do
  for b in /tmp/wt-a/hearth ./hearth; do
    for n in 1 4 16; do
      echo "streams $n r$r $b: $($b bench $D --parallel $n --prompt 128 --gen 128 --threads 2 2>&1 | grep -oE 'output [0-9.]+ tok/s \| TTFT p50 [0-9.]+ s, p99 [0-9.]+ s')"
    done
    echo "streams 4 x 2000 r$r $b: $($b bench $D --parallel 4 --prompt 2000 --gen 128 --threads 2 2>&1 | grep -oE 'output [0-9.]+ tok/s \| TTFT p50 [0-9.]+ s, p99 [0-9.]+ s')"
  done
  echo "streams r$r llama-batched-bench:"
  $L/llama-batched-bench -m $D -t 2 -tb 2 -c 16384 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,4,16 2>&1 | grep -E "^\|"
  $L/llama-batched-bench -m $D -t 2 -tb 2 -c 16384 -b 2048 -ub 512 -npp 2000 -ntg 128 -npl 4 2>&1 | grep -E "^\|" | tail -1
done
for r in 1 2; do
  for b in /tmp/wt-a/hearth ./hearth; do
    echo "short r$r $b: $($b bench $D --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 512: [0-9.]+ tok/s \| decode 128: [0-9.]+')"
  done
done

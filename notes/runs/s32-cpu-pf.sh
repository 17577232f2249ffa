#!/bin/bash
# s32-cpu-pf: the panel GEMV's prefetch (5a086b8) against its parent
# (506e6ba, built with make CUDA=0 in /tmp/wt-parent) and llama.cpp
# (0c1e570, /tmp/lcpu), alternated, two rounds: prefill 512 and decode 128
# after 512 on the default model and the 16-layer Q4_0 / Q8_0 / Q4_K_M models.
set -u
L="env LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-bench -t 2 -r 2"
for m in models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/small-q4_0.gguf /tmp/small-q8_0.gguf /tmp/small-q4km.gguf; do
  for r in 1 2; do
    for b in /tmp/wt-parent/hearth ./hearth; do
      echo "$m r$r $b: $($b bench $m --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -oE 'prefill 512: [0-9.]+ tok/s \| decode 128: [0-9.]+')"
    done
    echo "$m r$r llama.cpp: $($L -m $m -p 512 -n 0 2>&1 | grep -oE 'pp512 .*') | $($L -m $m -p 0 -n 128 -d 512 2>&1 | grep -oE 'tg128 @ d512 .*')"
  done
done

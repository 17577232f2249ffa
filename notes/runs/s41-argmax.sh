#!/bin/bash
# s41-argmax: the argmax without a chain of dependent loads (core/argmax.h) in the host sampler and the CPU pick,
# end to end: /tmp/wt-a (the tree before, make CUDA=0) against /tmp/wt-b (the same tree with the change, make
# CUDA=0), alternated, three rounds, default model, 2 threads, 128 / 128, greedy and llama-server's default
# filters (the host sampler's rows on the CPU).
set -u
D=models/SmolLM2-135M-Instruct.Q4_1.gguf
S="--temp 0.8 --top-p 0.95 --top-k 40 --min-p 0.05"
for r in 1 2 3; do
  for n in 1 16; do
    for smp in greedy sampled; do
      for b in /tmp/wt-a/hearth /tmp/wt-b/hearth; do
        echo "r$r n=$n $smp $b: $($b bench $D --parallel $n --prompt 128 --gen 128 --threads 2 $([ $smp = sampled ] && echo $S) 2>&1 | grep -oE 'output [0-9.]+ tok/s')"
      done
    done
  done
done

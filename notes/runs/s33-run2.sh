#!/bin/bash
# s33-run2 (the third of three consecutive calls; the first two stash the
# default model's parts, tools/bench/split_model.sh): test_cuda on 9bd2925,
# whose CPU reference attention now cuts positions in segments of 512 and
# whose KV views carry a head_dim; then the CPU backend's decode after 4000
# and 2000 prompt tokens and the engine at 16 streams on the host's Xeon
# (16 cores), 9bd2925 (/tmp/b/hearth) against the parent's code
# (.dev/parent.xz: 4ecfd1d's tree built with make CUDA=0 on the dev VM),
# alternated, two rounds.
set -u
mkdir -p "${OUT:-/tmp/out}"
{
bash tools/bench/device_run.sh tests
xz -dc .dev/parent.xz > /tmp/b/hearth-parent && chmod +x /tmp/b/hearth-parent
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
export LD_LIBRARY_PATH=/tmp/b/lib
lscpu | grep -E "Model name|^CPU\(s\)"
for r in 1 2; do
  for t in 16 8; do
    for p in 4000 2000; do
      for b in /tmp/b/hearth-parent /tmp/b/hearth; do
        echo "r$r t$t p$p $b: $(CUDA_VISIBLE_DEVICES= timeout 120 $b bench $M --device cpu --threads $t --prompt $p --gen 64 2>&1 | grep -oE "prefill $p: [0-9.]+ tok/s \| decode 64: [0-9.]+")"
      done
    done
  done
  for b in /tmp/b/hearth-parent /tmp/b/hearth; do
    echo "r$r streams 16 t16 $b: $(CUDA_VISIBLE_DEVICES= timeout 120 $b bench $M --device cpu --threads 16 --parallel 16 --prompt 128 --gen 128 2>&1 | grep -oE 'output [0-9.]+ tok/s')"
    echo "r$r streams 4 x 2000 t16 $b: $(CUDA_VISIBLE_DEVICES= timeout 120 $b bench $M --device cpu --threads 16 --parallel 4 --prompt 2000 --gen 128 2>&1 | grep -oE 'output [0-9.]+ tok/s')"
  done
done
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s33-run2.log"

#!/bin/bash
# s30-run4: the refactored benches once more (bench_pdl_chain with its copy
# bandwidth fixed and a third order: the trigger before the wait);
# HEARTH_PDL_EARLY=2 (the small kernels trigger their dependents before
# their wait) against the default, test_cuda cuda_layer under it, then
# bench_model BF16 and Q4_0 alternated.
set -u
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && tar -C $B -xJf .dev/extra.tar.xz
echo "## $(date +%T) bench_pdl_chain --links 160 --mb 0,2,8,33 --reps 20"
timeout 60 $B/bench_pdl_chain --links 160 --mb 0,2,8,33 --reps 20 2>&1 | tail -6
echo "## $(date +%T) bench_persist --bpsm 2 --smem 96 --reps 5"
timeout 40 $B/bench_persist --bpsm 2 --smem 96 --reps 5 2>&1 | tail -10
for t in bf16 q4_0; do
  f=/tmp/l8b-$t.gguf
  [ -s $f ] || timeout 120 python3 tools/bench/make_llama_gguf.py $f --type $t $([ $t = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1
done
echo "## $(date +%T) HEARTH_PDL_EARLY=2 test_cuda cuda_layer"
HEARTH_PDL_EARLY=2 timeout 120 $B/test_cuda cuda_layer 2>&1 | tail -3
for r in 1 2; do
  for t in bf16 q4_0; do
    for e in 1 2; do
      echo "## $(date +%T) HEARTH_PDL_EARLY=$e bench_model l8b-$t --prompt 512 --gen 128 --prefill 512 --reps 2"
      HEARTH_PDL_EARLY=$e timeout 60 $B/bench_model /tmp/l8b-$t.gguf --prompt 512 --gen 128 --prefill 512 --reps 2 2>&1 | grep -E '^decode'
    done
  done
done
echo "## $(date +%T) done"

#!/bin/bash
# s30-run2: the long-sequence graph test with run 1's records made the same
# as the others' (nd's upload flushed first); bench_persist's flag variant
# with its producer asking L2 for chunks --l2 KB ahead, with and without the
# 7 us attention stall.
set -u
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && tar -C $B -xJf .dev/extra.tar.xz
echo "## $(date +%T) test_cuda cuda_graph"
timeout 60 $B/test_cuda cuda_graph 2>&1 | tail -4
for st in 0 7; do
  for a in "--bpsm 2 --smem 96" "--bpsm 1 --smem 192"; do
    for l2 in 0 64 128 256 512 1024; do
      echo "## $(date +%T) bench_persist $a --stall $st --l2 $l2 --reps 5 (flag, ring rows)"
      timeout 40 $B/bench_persist $a --stall $st --l2 $l2 --reps 5 2>&1 | grep -E '^(ring |flag|ring-only|stream)'
    done
  done
done
echo "## $(date +%T) done"

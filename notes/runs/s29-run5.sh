#!/bin/bash
# s29-run5: the mbarrier / bulk-copy helpers moved from attention_flash_wg.cu
# and the two benches into cuda_internal.cuh: the flash tests, and the two
# benches once more.
set -u
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && tar -C $B -xJf .dev/extra.tar.xz
echo "## $(date +%T) test_cuda cuda_attention_flash"
timeout 100 $B/test_cuda cuda_attention_flash 2>&1 | tail -3
echo "## $(date +%T) bench_persist --bpsm 2 --smem 96 --reps 5"
timeout 30 $B/bench_persist --bpsm 2 --smem 96 --reps 5 2>&1 | tail -8
echo "## $(date +%T) bench_ring_gemv --reps 5"
timeout 30 $B/bench_ring_gemv --reps 5 2>&1 | tail -7
echo "## $(date +%T) done"

#!/bin/bash
# s29-run4: s29-run3's ring GEMV without its per-step 64-bit divisions (the
# row and column now advance 512 bytes a step): bench_ring_gemv, the GEMV
# tests with HEARTH_MMV_RING=1, bench_gemv and bench_model BF16 off / on.
set -u
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && tar -C $B -xJf .dev/extra.tar.xz
(timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1) > /tmp/gen.log 2>&1 &
echo "## $(date +%T) bench_ring_gemv"
timeout 60 $B/bench_ring_gemv 2>&1
echo "## $(date +%T) HEARTH_MMV_RING=1 test_cuda cuda_matmul"
HEARTH_MMV_RING=1 timeout 120 $B/test_cuda cuda_matmul 2>&1 | grep -vE "^ok " | tail -6
for r in 0 1; do
    echo "## $(date +%T) HEARTH_MMV_RING=$r bench_gemv --types bf16 --T 1"
    HEARTH_MMV_RING=$r timeout 60 $B/bench_gemv --types bf16 --T 1 2>&1 | tail -9 | head -7
done
wait; cat /tmp/gen.log
for r in 0 1; do
    echo "## $(date +%T) HEARTH_MMV_RING=$r bench_model bf16 --prompt 512 --gen 128 --prefill 512 --reps 1"
    HEARTH_MMV_RING=$r timeout 60 $B/bench_model /tmp/l8b-bf16.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode"
done
echo "## $(date +%T) done"

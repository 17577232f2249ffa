#!/bin/bash
# s29-run3: the BF16 one-row GEMV with its weights streamed through a ring
# of cp.async.bulk stages. bench_ring_gemv (standalone: does a real GEMV keep
# s29-run2's 4.5 TB/s ring stream?), then the engine's version
# (mmv_ring.cu, HEARTH_MMV_RING=1): the GEMV and layer tests with it,
# bench_gemv and bench_model BF16 with it off / on, alternated.
set -u
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && tar -C $B -xJf .dev/extra.tar.xz
(timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1) > /tmp/gen.log 2>&1 &
echo "## $(date +%T) bench_ring_gemv"
timeout 60 $B/bench_ring_gemv 2>&1
for f in cuda_matmul cuda_layer; do
    echo "## $(date +%T) HEARTH_MMV_RING=1 test_cuda $f"
    HEARTH_MMV_RING=1 timeout 120 $B/test_cuda $f 2>&1 | grep -vE "^ok |^  layer " | tail -12
done
for r in 0 1; do
    echo "## $(date +%T) HEARTH_MMV_RING=$r bench_gemv --types bf16 --T 1"
    HEARTH_MMV_RING=$r timeout 60 $B/bench_gemv --types bf16 --T 1 2>&1 | tail -9
done
wait; cat /tmp/gen.log
for r in 0 1 0 1; do
    echo "## $(date +%T) HEARTH_MMV_RING=$r bench_model bf16 --prompt 512 --gen 128 --prefill 512 --reps 1"
    HEARTH_MMV_RING=$r timeout 60 $B/bench_model /tmp/l8b-bf16.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
        grep -E "^(decode|roofline)"
done
echo "## $(date +%T) done"

#!/bin/bash
# s30-run1: session 29's untested changes (the graph test's new checks, the
# mbarrier helpers moved into cuda_internal.cuh: flash tests, the benches),
# bench_persist's new flag / dyn variants (grid barriers replaced by done
# counters; dyn: chunks claimed from a counter), then issue 7's table,
# issue 6's saturation and the PyTorch peer, all on this tree.
set -u
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && tar -C $B -xJf .dev/extra.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader
echo "## $(date +%T) test_cuda cuda_graph"
timeout 60 $B/test_cuda cuda_graph 2>&1 | tail -4
echo "## $(date +%T) test_cuda cuda_attention_flash"
timeout 120 $B/test_cuda cuda_attention_flash 2>&1 | tail -3
for a in "--bpsm 2 --smem 96" "--bpsm 1 --smem 192" "--bpsm 2 --smem 96 --stall 7" "--bpsm 2 --smem 96"; do
  echo "## $(date +%T) bench_persist $a --reps 5"
  timeout 40 $B/bench_persist $a --reps 5 2>&1 | tail -10
done
echo "## $(date +%T) bench_ring_gemv --reps 5"
timeout 30 $B/bench_ring_gemv --reps 5 2>&1 | tail -7
bash tools/bench/device_run.sh issue7 issue6
echo "## $(date +%T) peer_torch.py --prefill 512,2048 --prompt 512 --gen 128 --reps 3"
timeout 200 python3 tools/bench/peer_torch.py --prefill 512,2048 --prompt 512 --gen 128 --reps 3 2>&1 | grep -v Warning | tail -8
echo "## $(date +%T) done"

#!/bin/bash
# s29-run3: a BF16 batch-1 GEMV streaming its weights through a ring of
# cp.async.bulk stages (bench_ring_gemv: does a real GEMV keep the 4.5 TB/s
# of s29-run2's ring-only stream?) beside hearth's streamed GEMV on the same
# shapes (bench_gemv --types bf16 --T 1); then issue 6's table (1, 8, 64, 256
# streams at 128 / 128 and 1000 / 1000, BF16, f16 KV).
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && tar -C /tmp/b -xJf .dev/extra.tar.xz
for a in "" "--stage-kb 8" "--stage-kb 32 --smem-kb 113" "--bpsm 1 --smem-kb 220"; do
    echo "## $(date +%T) bench_ring_gemv $a"
    timeout 60 /tmp/b/bench_ring_gemv $a 2>&1
done
echo "## $(date +%T) bench_gemv --types bf16 --T 1"
timeout 90 /tmp/b/bench_gemv --types bf16 --T 1 2>&1
tools/bench/device_run.sh streams
echo "## $(date +%T) done"

#!/bin/bash
# s29-run2: bench_persist's ring variants (a producer warp streaming 16 KB
# stages through cp.async.bulk while the consumer warps meet at the grid
# barriers: can a persistent batch-1 kernel keep DRAM streaming through its
# phases?), then issue 7's table (bench_model on BF16, Q8_0, Q4_0 + Q6_K
# head) and issue 6's saturation run (512 streams x 1000 / 1000, e4m3 KV).
set -u
export HEARTH_ROOT=$PWD
for a in "--bpsm 1 --smem 192" "--bpsm 1 --smem 192 --stall 7" "--bpsm 2 --smem 96" "--bpsm 4 --smem 48"; do
    echo "## $(date +%T) bench_persist $a"
    timeout 60 .dev/bench_persist $a --reps 9 2>&1
done
tools/bench/device_run.sh issue7 issue6
echo "## $(date +%T) done"

#!/bin/bash
# s29-run2: issue 7's table (bench_model on BF16, Q8_0, Q4_0 + Q6_K head) and
# issue 6's saturation run (512 streams x 1000 / 1000, e4m3 KV), on the tree
# with the instantiate-later patch.
set -u
export HEARTH_ROOT=$PWD
tools/bench/device_run.sh issue7 issue6
echo "## $(date +%T) done"

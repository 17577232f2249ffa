#!/bin/bash
# s29-run3: issue 6's table: output tok/s and TTFT at 1, 8, 64 and 256
# streams for 128 / 128 and 1000 / 1000 (BF16, f16 KV), one run each.
set -u
export HEARTH_ROOT=$PWD
tools/bench/device_run.sh streams
echo "## $(date +%T) done"

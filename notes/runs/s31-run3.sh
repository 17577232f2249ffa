#!/bin/bash
# s31-run3 (and s31-run4, on 237ebf3): the whole test_cuda on e5271f4 (the CPU attention rework changed
# the CPU reference the CUDA ops and the default-model greedy runs are
# checked against); the default model joined from the parts of the two calls
# before (tools/bench/split_model.sh).
set -u
mkdir -p "${OUT:-/tmp/out}"
HEARTH_TEST_ERRS=1 bash tools/bench/device_run.sh tests 2>&1 | tee "${OUT:-/tmp/out}/s31-run3.log"

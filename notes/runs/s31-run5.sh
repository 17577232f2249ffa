#!/bin/bash
# s31-run5: the whole test_cuda on de6e409 (after s31-run4 the CPU reference
# changed again: swiglu's vector exp, rows over threads, f16 K / V rows read
# directly); the default model joined from the parts of the two calls before
# (tools/bench/split_model.sh). test_cuda's own exit status is printed.
set -u
mkdir -p "${OUT:-/tmp/out}"
{
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz
[ -s models/SmolLM2-135M-Instruct.Q4_1.gguf ] || tools/bench/split_model.sh join
echo "## $(date +%T) test_cuda"
timeout 450 $B/test_cuda > /tmp/tc.log 2>&1
echo "test_cuda exit status $?"
grep -vE "^ok |^  layer |^  cuda (mistral|llama|qwen)" /tmp/tc.log | tail -60
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s31-run5.log"

#!/bin/bash
# s31-run4: the whole test_cuda on 237ebf3 (s31-run3 aborted in the CPU
# reference of a 200-row flash case: the CPU attention's max_tokens assert,
# fixed in 88f3577); the default model joined from the parts of the two calls
# before (tools/bench/split_model.sh). test_cuda's own exit status is printed.
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
} 2>&1 | tee "${OUT:-/tmp/out}/s31-run4.log"

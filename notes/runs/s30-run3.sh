#!/bin/bash
# s30-run3: issue 7's table with llama.cpp in the same call; issue 6's
# repeated 4000-token prompt and its streams table, with llama.cpp's batched
# bench at 128 / 128 beside it.
set -u
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B /tmp/lc && tar -C $B -xJf .dev/bin.tar.xz && tar -C /tmp/lc -xJf .dev/llama.tar.xz
bash tools/bench/device_run.sh issue7
echo "## $(date +%T) peer_llamacpp.sh (llama-bench -fa on: pp512/pp2048 at ubatch 512 and 2048, tg128 after 512)"
timeout 200 bash tools/bench/peer_llamacpp.sh /tmp/lc /tmp/l8b-bf16.gguf /tmp/l8b-q8_0.gguf /tmp/l8b-q4_0.gguf
echo "## $(date +%T) hearth bench --repeat --prompt 4000 --gen 16 --reps 6"
timeout 120 $B/hearth bench /tmp/l8b-bf16.gguf --device cuda --repeat --prompt 4000 --gen 16 --reps 6 2>&1 | grep -vE '^\s*$' | tail -12
bash tools/bench/device_run.sh streams
echo "## $(date +%T) llama-batched-bench 128 / 128 at 1, 8, 64, 256 streams"
LD_LIBRARY_PATH=/tmp/lc/lib:/usr/local/cuda/lib64 timeout 150 /tmp/lc/bin/llama-batched-bench -m /tmp/l8b-bf16.gguf \
  -ngl 99 -fa on -c 65536 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,8,64,256 2>&1 | grep -E "^\||error"
echo "## $(date +%T) done"

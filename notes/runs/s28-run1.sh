#!/bin/bash
# s28-run1 (s27-run2 again, on the committed tree, with the default model joined for the two model tests): (1) a step seen the second time runs eagerly and is captured
# behind it; (2) the Hopper prefill kernel cuts a short chunk's positions in
# parts after a long prefix (HEARTH_ATTN_SPLIT=0: not). test_cuda whole,
# bench_attn with the new chunk cases (split / not), the repeated 4000-token
# prompt (split / not), batch-1 BF16 decode.
set -u
export HEARTH_ROOT=$PWD
[ -s models/SmolLM2-135M-Instruct.Q4_1.gguf ] || tools/bench/split_model.sh join
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
(timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 2>&1 | tail -1) > /tmp/gen.log 2>&1 &
echo "## $(date +%T) test_cuda (ok lines left out)"
timeout 420 /tmp/b/test_cuda 2>&1 | grep -vE "^ok |^  layer |^  cuda (mistral|llama|qwen)" | tail -30
for kv in f16 fp8; do
  for sp in 1 0; do
    echo "## $(date +%T) bench_attn --kv $kv, HEARTH_ATTN_SPLIT=$sp"
    HEARTH_ATTN_SPLIT=$sp timeout 90 /tmp/b/bench_attn --kv $kv --T 2048,512@1536,4096,16@3984,100@1000,64@8000 --reps 21 --variants flash 2>&1 | grep -v "^#"
  done
done
wait; cat /tmp/gen.log
for sp in 1 0; do
  echo "## $(date +%T) hearth bench --repeat --prompt 4000 --gen 16 --reps 6, HEARTH_ATTN_SPLIT=$sp"
  HEARTH_ATTN_SPLIT=$sp timeout 120 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --repeat --prompt 4000 --gen 16 --reps 6 2>&1 | grep "^prefix"
done
echo "## $(date +%T) bench_model bf16 --prompt 512 --gen 128 --prefill 512,2048 --reps 3"
timeout 150 /tmp/b/bench_model /tmp/l8b-bf16.gguf --prompt 512 --gen 128 --prefill 512,2048 --reps 3 2>&1 | grep -E "^(prefill|decode|roofline)"
echo "## $(date +%T) done"

#!/bin/bash
# s31-cpu-engine: issue 6's CPU figures (1, 4, 16 streams of 128 in / 128 out
# through the engine) for f955c5f (/tmp/wt-parent) and this tree, alternated,
# with llama.cpp's batched bench beside them; then the 16-layer Q4_K_M model.
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
for r in 1 2; do
  for n in 1 4 16; do
    for b in /tmp/wt-parent/hearth ./hearth; do
      echo "$b --parallel $n: $($b bench $M --parallel $n --prompt 128 --gen 128 --threads 2 2>&1 | grep -E '^engine \|' | head -1)"
    done
  done
done
echo "## llama-batched-bench -t 2 -tb 2 -npp 128 -ntg 128 -npl 1,4,16"
LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-batched-bench -m $M -t 2 -tb 2 -c 8192 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,4,16 2>&1 | grep -E "^\|"
Q=/tmp/small-q4km.gguf
[ -s $Q ] || python3 tools/bench/make_llama_gguf.py $Q --type q4_K_M --layers 16 --hidden 1024 --ffn 4096 --heads 16 --kv-heads 4 --vocab 32000 >/dev/null
for r in 1 2; do
  for b in /tmp/wt-parent/hearth ./hearth; do
    echo "$b q4km 512/128: $($b bench $Q --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -o 'prefill.*')"
  done
  echo "llama.cpp q4km: $(LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-bench -m $Q -t 2 -r 2 -p 512 -n 128 -d 512 2>&1 | grep -E 'pp|tg' | awk -F'|' '{printf "%s %s; ", $7, $8}')"
done

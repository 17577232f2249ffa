#!/bin/bash
# s31-cpu-final2: as s31-cpu-final, on b84c8e0 (f16 KV by default on the CPU) against f955c5f
# (/tmp/wt-parent, make CUDA=0) and llama.cpp 0c1e570 built for this CPU
# (/tmp/lcpu), alternated: the default model at 512 / 128 and 128 / 128, the
# engine at 1 / 4 / 16 streams beside llama-batched-bench, the Q4_K_M model.
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
Q=/tmp/small-q4km.gguf
LB() { LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-bench -t 2 -r 2 "$@" 2>&1 | grep -E '(pp|tg)[0-9]' | awk -F'|' '{printf "%s %s; ", $7, $8}'; }
for r in 1 2 3; do
  echo "## round $r $(date +%T)"
  for b in /tmp/wt-parent/hearth ./hearth; do
    echo "$b 512/128: $($b bench $M --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -o 'prefill.*')"
    echo "$b 128/128: $($b bench $M --prompt 128 --gen 128 --threads 2 --reps 2 2>&1 | grep -o 'prefill.*')"
  done
  echo "llama.cpp: $(LB -m $M -p 128,512 -n 0)$(LB -m $M -p 0 -n 128 -d 0,512)"
done
for r in 1 2; do
  echo "## engine round $r $(date +%T)"
  for n in 1 4 16; do
    for b in /tmp/wt-parent/hearth ./hearth; do
      echo "$b --parallel $n: $($b bench $M --parallel $n --prompt 128 --gen 128 --threads 2 2>&1 | grep -E '^engine \|' | head -1)"
    done
  done
done
echo "## llama-batched-bench -t 2 -tb 2 -npp 128 -ntg 128 -npl 1,4,16 $(date +%T)"
LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-batched-bench -m $M -t 2 -tb 2 -c 8192 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,4,16 2>&1 | grep -E "^\|"
for r in 1 2; do
  echo "## Q4_K_M round $r $(date +%T)"
  for b in /tmp/wt-parent/hearth ./hearth; do
    echo "$b q4km 512/128: $($b bench $Q --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -o 'prefill.*')"
  done
  echo "llama.cpp q4km: $(LB -m $Q -p 512 -n 0)$(LB -m $Q -p 0 -n 128 -d 512)"
done
echo "## done $(date +%T)"

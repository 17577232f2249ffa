#!/bin/bash
# s31-cpu-ab: the CPU attention rework (41bdbdd, e5271f4) against its parent
# f955c5f (built with make CUDA=0 in a worktree at /tmp/wt-parent) and
# llama.cpp (CPU build, /tmp/lcpu), alternated, on this 2-core VM.
M=${M:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
LC="env LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-bench -m $M -t 2 -r 2"
for r in 1 2 3; do
  echo "## round $r $(date +%T)"
  for b in /tmp/wt-parent/hearth ./hearth; do
    echo "$b 512/128: $($b bench $M --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -o 'prefill.*')"
    echo "$b 128/128: $($b bench $M --prompt 128 --gen 128 --threads 2 --reps 2 2>&1 | grep -o 'prefill.*')"
  done
  echo "llama.cpp: $($LC -p 128,512 -n 0 2>&1 | grep -E 'pp' | awk -F'|' '{printf "%s %s; ", $7, $8}')$($LC -p 0 -n 128 -d 0,512 2>&1 | grep -E 'tg' | awk -F'|' '{printf "%s %s; ", $7, $8}')"
done

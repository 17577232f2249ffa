#!/bin/bash
# s31-cpu-q8q4: 16-layer Q8_0 and Q4_0 models (make_llama_gguf.py --type q8_0|q4_0
# --layers 16 --hidden 1024 --ffn 4096 --heads 16 --kv-heads 4 --vocab 32000):
# f955c5f (/tmp/wt-parent) against this tree (f16 KV by default) and llama.cpp,
# prefill 512 from empty and decode 128 after it, two rounds.
LB() { LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-bench -t 2 -r 2 "$@" 2>&1 | grep -E '(pp|tg)[0-9]' | awk -F'|' '{printf "%s %s; ", $7, $8}'; }
for r in 1 2; do
  for t in q8_0 q4_0; do
    M=/tmp/small-$t.gguf
    echo "## round $r $t $(date +%T)"
    for b in /tmp/wt-parent/hearth ./hearth; do
      echo "$b: $($b bench $M --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -o 'prefill.*')"
    done
    echo "llama.cpp: $(LB -m $M -p 512 -n 0)$(LB -m $M -p 0 -n 128 -d 512)"
  done
done

#!/bin/bash
# s31-cpu-q4km: the 16-layer Q4_K_M model (make_llama_gguf.py --type q4_K_M
# --layers 16 --hidden 1024 --ffn 4096 --heads 16 --kv-heads 4 --vocab 32000)
# after the attention rework and the q4_K mins (237ebf3), against f955c5f
# (/tmp/wt-parent) and llama.cpp (prefill 512 from empty, decode 128 after 512).
Q=/tmp/small-q4km.gguf
for r in 1 2 3; do
  for b in /tmp/wt-parent/hearth ./hearth; do
    echo "$b q4km 512/128: $($b bench $Q --prompt 512 --gen 128 --threads 2 --reps 2 2>&1 | grep -o 'prefill.*')"
  done
  echo "llama.cpp q4km: $(LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-bench -m $Q -t 2 -r 2 -p 512 -n 0 2>&1 | grep -E 'pp' | awk -F'|' '{printf "%s %s; ", $7, $8}')$(LD_LIBRARY_PATH=/tmp/lcpu/lib /tmp/lcpu/bin/llama-bench -m $Q -t 2 -r 2 -p 0 -n 128 -d 512 2>&1 | grep -E 'tg' | awk -F'|' '{printf "%s %s; ", $7, $8}')"
done

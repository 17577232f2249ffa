#!/usr/bin/env bash
# s37-run2: where `hearth train --device cuda` spends a step on the 8B shape (CUPTI trace, two steps of
# 4 x 512), after test_cuda's attention op case with its new scale. carry: [".dev/bin.tar.xz", ".dev/lib"]
set -uo pipefail
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz || exit 1
hdr() { echo "## $(date +%T) $*"; }
hdr "test_cuda cuda_train_op_attention"
timeout 60 $B/test_cuda cuda_train_op_attention 2>&1 | tail -4
[ -s /tmp/l8b-bf16.gguf ] || timeout 200 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 >/dev/null 2>&1
python3 - <<'PY'
import json, random
r = random.Random(1)
with open("/tmp/t8b.jsonl", "w") as f:
    for _ in range(16):
        f.write(json.dumps({"text": " ".join("t%d" % r.randrange(300, 128000) for _ in range(600))}) + "\n")
PY
hdr "hearth train, traced, 2 steps"
LD_LIBRARY_PATH=$PWD/.dev/lib CUDA_INJECTION64_PATH=$PWD/.dev/lib/libhearth_trace.so HEARTH_TRACE_OUT=/tmp/tr.csv \
    timeout 300 $B/hearth train /tmp/l8b-bf16.gguf --data /tmp/t8b.jsonl --out /tmp/o8b --steps 2 --batch 4 \
    --max-len 512 --rank 16 --alpha 32 --device cuda 2>&1 | tail -4
ls -la /tmp/tr.csv
timeout 120 python3 tools/prof/timeline.py /tmp/tr.csv --gap 2000 --window 0 --phases 2 2>&1 | head -90
hdr done

#!/usr/bin/env bash
# s37-run1: LoRA training on the H200 (session 37). The trainer's CUDA ops against the CPU's, the trainer
# against PEFT's goldens and the CPU trainer (test_cuda train), then `hearth train --device cuda` on the
# Llama-3.1-8B-shaped BF16 GGUF beside PyTorch + PEFT (tools/bench/peer_train_torch_gpu.py), 4 x 512
# tokens a step. carry: [".dev/bin.tar.xz"]
set -uo pipefail
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz || exit 1
hdr() { echo "## $(date +%T) $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv,noheader
hdr "test_cuda train"
timeout 240 $B/test_cuda train 2>&1 | tail -60
hdr "the 8B-shaped BF16 GGUF and 16 texts of ~600 tokens"
[ -s /tmp/l8b-bf16.gguf ] || timeout 200 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 >/dev/null 2>&1
python3 - <<'PY'
import json, random
r = random.Random(1)
with open("/tmp/t8b.jsonl", "w") as f:
    for _ in range(16):
        f.write(json.dumps({"text": " ".join("t%d" % r.randrange(300, 128000) for _ in range(600))}) + "\n")
PY
ls -la /tmp/l8b-bf16.gguf /tmp/t8b.jsonl
for g in 1 0; do
    hdr "hearth train --device cuda, rank 16, 4 x 512 a step, HEARTH_GRAPHS=$g"
    HEARTH_GRAPHS=$g timeout 300 $B/hearth train /tmp/l8b-bf16.gguf --data /tmp/t8b.jsonl --out /tmp/o8b --steps 4 \
        --batch 4 --max-len 512 --rank 16 --alpha 32 --device cuda 2>&1 | tail -8
done
mkdir -p /tmp/py && for w in .dev/wheels/peft-*.whl .dev/wheels/accelerate-*.whl; do python3 -m zipfile -e $w /tmp/py; done
for micro in 1 4; do
    hdr "PyTorch + PEFT, bf16, rank 16, 4 x 512 a step, $micro a forward"
    PYTHONPATH=/tmp/py timeout 300 python3 tools/bench/peer_train_torch_gpu.py --micro $micro --steps 4 2>&1 | tail -6
done

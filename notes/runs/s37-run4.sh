#!/usr/bin/env bash
# s37-run4: s37-run3 after the attention took its kv heads a pass at once (fewer, batched GEMM calls):
# 8B-shaped BF16 GGUF, packed (4 x 512 a forward, the default) and not (--pack 512), and 8 x 512 a step,
# beside PyTorch + PEFT at 4 and 8 sequences a step, one at a time and batched. carry: [".dev/bin.tar.xz",
# ".dev/wheels"]
set -uo pipefail
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz || exit 1
hdr() { echo "## $(date +%T) $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv,noheader
hdr "test_cuda train"
timeout 240 $B/test_cuda train 2>&1 | grep -v "^ok" | tail -40
[ -s /tmp/l8b-bf16.gguf ] || timeout 200 python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 >/dev/null 2>&1
python3 - <<'PY'
import json, random
r = random.Random(1)
with open("/tmp/t8b.jsonl", "w") as f:
    for _ in range(48):
        f.write(json.dumps({"text": " ".join("t%d" % r.randrange(300, 128000) for _ in range(600))}) + "\n")
PY
run() { # batch pack
    hdr "hearth train --device cuda, rank 16, $1 x 512 a step, --pack $2"
    timeout 300 $B/hearth train /tmp/l8b-bf16.gguf --data /tmp/t8b.jsonl --out /tmp/o8b --steps 5 --batch $1 \
        --max-len 512 --rank 16 --alpha 32 --pack $2 --device cuda 2>&1 | grep -E "^step|GiB|error|out of"
}
run 4 2048; run 8 4096; run 4 512
mkdir -p /tmp/py && for w in .dev/wheels/peft-*.whl .dev/wheels/accelerate-*.whl; do python3 -m zipfile -e $w /tmp/py; done
for bm in "4 4" "8 8" "4 1"; do
    set -- $bm
    hdr "PyTorch + PEFT, bf16, rank 16, $1 x 512 a step, $2 a forward"
    PYTHONPATH=/tmp/py timeout 300 python3 tools/bench/peer_train_torch_gpu.py --batch $1 --micro $2 --steps 5 2>&1 | tail -6
done
hdr done

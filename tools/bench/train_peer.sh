#!/usr/bin/env bash
# train_peer.sh - LoRA SFT throughput on the CPU, side by side: `hearth train` and
# PyTorch + PEFT (tools/bench/peer_train_torch.py) on the same JSONL, steps,
# batch and threads. Run from anywhere on the 16-core CPU machine (torch and
# transformers installed; PEFT, accelerate and gguf come from .dev/wheels, no
# network needed); ~3-5 min in all. A measurement, never a test.
#
#   bash tools/bench/train_peer.sh            # HEARTH=/tmp/b/hearth by default
#
# Environment: HEARTH (binary), MODEL (models/SmolLM2-135M-Instruct.Q4_1.gguf),
# THREADS ("4 8"), REPS (2), STEPS (8), BATCH (4), EXAMPLES (32), WORDS (150),
# LIMIT (40: seconds of training a run may take; the peer stops after the step
# that passes it, hearth is killed at LIMIT + 30 s and its printed steps count).
#
# Each run prints a "## HH:MM:SS what" header, its log, then a summary line
#   RESULT <peer> threads <T> rep <r> steps <n> median_tok_s <x> step1_loss <l>
# (median over the steps after the first, the warm-up); at the end a table of
# the medians over the reps:  grep -E '^(RESULT|SUMMARY)' LOG
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
HEARTH=${HEARTH:-/tmp/b/hearth}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-"4 8"}
REPS=${REPS:-2}
STEPS=${STEPS:-8}
BATCH=${BATCH:-4}
EXAMPLES=${EXAMPLES:-32}
WORDS=${WORDS:-150}
LIMIT=${LIMIT:-40}
W=$(mktemp -d /tmp/train_peer.XXXXXX)

hdr() { echo "## $(date +%T) $*"; }

[ -x "$HEARTH" ] || { echo "train_peer: no hearth binary at $HEARTH (set HEARTH=)"; exit 1; }
[ -s "$MODEL" ] || { echo "train_peer: no model at $MODEL (set MODEL=)"; exit 1; }

hdr "setup: wheels from .dev/wheels into $W/py"
mkdir -p "$W/py"
for whl in .dev/wheels/peft-*.whl .dev/wheels/accelerate-*.whl .dev/wheels/gguf-*.whl; do
    [ -s "$whl" ] || { echo "train_peer: missing $whl"; exit 1; }
    python3 -m zipfile -e "$whl" "$W/py" || exit 1
done
export PYTHONPATH="$W/py${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false
python3 -c 'import torch, transformers, peft, accelerate, gguf, os
print("python", __import__("sys").version.split()[0], "| torch", torch.__version__, "| transformers", transformers.__version__,
      "| peft", peft.__version__, "| accelerate", accelerate.__version__, "| gguf ok |", os.cpu_count(), "CPUs")' || exit 1
lscpu 2>/dev/null | grep -E '^(Model name|Socket|Core|Thread|CPU\(s\)|L3)'
echo "SIMD: $(grep -o -w -E 'avx2|fma|avx512f|avx512_bf16|avx512_vnni|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
"$HEARTH" --version 2>&1 | head -1

DATA=$W/train.jsonl
python3 tools/bench/make_train_data.py "$DATA" --examples "$EXAMPLES" --words "$WORDS" || exit 1

# median tok/s of a log's step lines after the first, and the first step's loss
summarize() { # peer threads rep log
    python3 - "$@" <<'EOF'
import re, statistics, sys
peer, t, rep, log = sys.argv[1:]
steps = [l for l in open(log, errors="replace") if re.match(r"step \d+/\d+ \|", l)]
rates = [float(re.search(r"\| ([0-9.]+) tok/s", l).group(1)) for l in steps[1:]]
loss1 = re.search(r"\| loss ([0-9.]+)", steps[0]).group(1) if steps else "nan"
med = statistics.median(rates) if rates else float("nan")
print(f"RESULT {peer} threads {t} rep {rep} steps {len(steps)} median_tok_s {med:.0f} step1_loss {loss1}")
EOF
}

for T in $THREADS; do
    for r in $(seq 1 "$REPS"); do
        hdr "hearth train, $T threads, rep $r: $STEPS steps of $BATCH examples"
        L=$W/hearth-$T-$r.log
        timeout $((LIMIT + 30)) "$HEARTH" train "$MODEL" --data "$DATA" --out "$W/adapter-$T" --steps "$STEPS" \
            --batch "$BATCH" --threads "$T" >"$L" 2>&1
        echo "(exit $?)" >>"$L"
        cat "$L"
        summarize hearth "$T" "$r" "$L"

        hdr "torch + peft, $T threads, rep $r: $STEPS steps of $BATCH examples"
        L=$W/torch-$T-$r.log
        OMP_NUM_THREADS=$T MKL_NUM_THREADS=$T timeout $((LIMIT + 60)) python3 tools/bench/peer_train_torch.py \
            --model "$MODEL" --data "$DATA" --steps "$STEPS" --batch "$BATCH" --threads "$T" \
            --time-limit "$LIMIT" >"$L" 2>&1
        echo "(exit $?)" >>"$L"
        grep -v -i 'warn' "$L" | tail -n 40
        summarize torch "$T" "$r" "$L"
    done
done | tee "$W/all.log"

hdr "summary (median tok/s over the reps; the peer's loss at step 1 should match hearth's: same weights, same examples)"
python3 - "$W/all.log" <<'EOF'
import re, statistics, sys
res = {}
for l in open(sys.argv[1]):
    m = re.match(r"RESULT (\S+) threads (\d+) rep \d+ steps \d+ median_tok_s (\S+) step1_loss (\S+)", l)
    if m:
        res.setdefault((m[1], int(m[2])), []).append((float(m[3]), m[4]))
for t in sorted({t for _, t in res}):
    h = [x for x, _ in res.get(("hearth", t), [])]
    p = [x for x, _ in res.get(("torch", t), [])]
    hm = statistics.median(h) if h else float("nan")
    pm = statistics.median(p) if p else float("nan")
    l1 = lambda k: "/".join(s for _, s in res.get((k, t), []))
    print(f"SUMMARY threads {t} | hearth {hm:.0f} tok/s | torch+peft {pm:.0f} tok/s | hearth/torch {hm / pm:.2f}x"
          f" | step1 loss hearth {l1('hearth')} torch {l1('torch')}")
EOF
echo "logs in $W"

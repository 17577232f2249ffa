#!/bin/sh
# greedy_vs_goldens.sh [HEARTH] [DEVICE] - `hearth run` greedy on every tiny
# GGUF fixture (tests/fixtures/tiny-gguf, llama.cpp goldens), both greedy
# prompts, f32 and f16 KV, on DEVICE (default cuda: the check the GPU machine
# runs; test_parity.c already covers the CPU). Prints each continuation that
# differs from the golden and a count; exits 1 if any differs.
# Run from the repository root: tools/oracle/greedy_vs_goldens.sh ./hearth cuda
H=${1:-./hearth}
DEV=${2:-cuda}
ok=0
bad=0
for G in tests/fixtures/tiny-gguf/*.golden.json; do
    F=${G%.golden.json}.gguf
    for i in 0 1; do
        P=$(python3 -c "import json; print(','.join(map(str, json.load(open('$G'))['greedy'][$i]['prompt_ids'])))")
        W=$(python3 -c "import json; print(' '.join(map(str, json.load(open('$G'))['greedy'][$i]['output_ids'])))")
        N=$(echo "$W" | wc -w)
        for kv in f32 f16; do
            O=$("$H" run "$F" --prompt-ids "$P" -n "$N" --temp 0 --ids --ignore-eos --device "$DEV" --kv-type "$kv" 2>/dev/null)
            if [ "$O" = "$W" ]; then
                ok=$((ok + 1))
            else
                bad=$((bad + 1))
                echo "$(basename "$F" .gguf) greedy $i kv $kv differs"
                echo "  got  $O"
                echo "  want $W"
            fi
        done
    done
done
echo "tiny GGUF greedy on $DEV against the llama.cpp goldens: $ok identical, $bad differ"
[ "$bad" -eq 0 ]

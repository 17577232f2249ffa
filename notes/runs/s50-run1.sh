#!/usr/bin/env bash
# session 50: the tags patch's test and A/B against HEAD's kernel, its stamps; on an H200 issue 7 and 6 after
# issue 7's decode after (the budget's remainder)
cd "$(dirname "$0")/.."
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && echo "$gpu"
echo "## $(date +%T) test_cuda decode_layers"
timeout 60 /tmp/b/test_cuda decode_layers 2>&1 | tail -12
m() { # as device_run.sh's model()
    local f=/tmp/l8b-$1.gguf
    [ -s "$f" ] || timeout 120 python3 tools/bench/make_llama_gguf.py "$f" --type "$1" \
        $([ "$1" = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1
    echo "$f"
}
case "$gpu" in *H200*) types="q4_0 q8_0 bf16"; n=1 ;; *) types="q4_0 q8_0"; n="1 2" ;; esac
for t in $types; do
    f=$(m $t)
    for i in $n; do
        for b in bench_model_prev bench_model; do
            echo "## $(date +%T) $b $f --prompt 512 --gen 128 --prefill 512 --reps 1"
            timeout 60 /tmp/b/$b $f --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 | grep -E "^(decode|roofline|bench_model)"
        done
    done
done
for dl in 1 0; do
    HEARTH_DECODE_LAYERS=$dl timeout 60 /tmp/b/hearth run /tmp/l8b-q4_0.gguf "The quick brown fox jumps over the lazy dog." \
        --temp 0 -n 200 --device cuda >/tmp/greedy$dl.txt 2>/tmp/greedy$dl.err
done
cmp -s /tmp/greedy0.txt /tmp/greedy1.txt && echo "q4_0 greedy text identical" || { echo "q4_0 greedy DIFFERS"; tail -2 /tmp/greedy1.err; }
echo "## $(date +%T) bench_model_st q4_0 (stamps)"
timeout 60 /tmp/b/bench_model_st /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
    grep -E "^decode|^roofline|^decode_layers stamps|^  "
case "$gpu" in
*H200*)
    for t in bf16 q8_0 q4_0; do
        for dl in 1 0; do
            echo "## $(date +%T) HEARTH_DECODE_LAYERS=$dl bench_model /tmp/l8b-$t.gguf --prompt 512 --gen 128 --prefill 512,2048 --reps 2"
            HEARTH_DECODE_LAYERS=$dl timeout 60 /tmp/b/bench_model /tmp/l8b-$t.gguf --prompt 512 --gen 128 \
                --prefill 512,2048 --reps 2 2>&1 | grep -E "^(copy|prefill|decode|roofline)"
        done
    done
    m=/tmp/l8b-bf16.gguf
    echo "## $(date +%T) hearth bench --parallel 512 --prompt 1000 --gen 1000 --kv-type fp8"
    timeout 150 /tmp/b/hearth bench "$m" --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 2>&1 |
        grep -E "^engine" ;;
esac
echo "## $(date +%T) done"

#!/usr/bin/env bash
# session 50: the tags patch (16-byte aligned act) and HEARTH_DL_PREFETCH (L2 prefetch ahead of the claims):
# test, A/B against HEAD's kernel (bench_model_prev), stamps; on an H200 issue 7 and 6 after
cd "$(dirname "$0")/.."
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && echo "$gpu"
h() { echo "## $(date +%T) $*"; }
h "test_cuda decode_layers"
timeout 60 /tmp/b/test_cuda decode_layers 2>&1 | tail -6
h "HEARTH_DL_PREFETCH=1056 test_cuda decode_layers"
HEARTH_DL_PREFETCH=1056 timeout 60 /tmp/b/test_cuda decode_layers 2>&1 | tail -6
m() { # as device_run.sh's model()
    local f=/tmp/l8b-$1.gguf
    [ -s "$f" ] || timeout 120 python3 tools/bench/make_llama_gguf.py "$f" --type "$1" \
        $([ "$1" = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1
    echo "$f"
}
bm() { # bench_model binary, file, prefetch
    h "HEARTH_DL_PREFETCH=$3 $1 $2"
    HEARTH_DL_PREFETCH=$3 timeout 60 /tmp/b/$1 $2 --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 | grep -E "^(decode|bench_model)"
}
case "$gpu" in *H200*) types="q4_0 q8_0 bf16"; n=1 ;; *) types="q4_0 q8_0 bf16"; n="1 2" ;; esac
for t in $types; do
    f=$(m $t)
    for i in $([ $t = bf16 ] && echo 1 || echo "$n"); do
        bm bench_model_prev $f 0
        for pf in $([ $t = bf16 ] && echo "0 1056" || echo "0 528 1056 2112"); do bm bench_model $f $pf; done
    done
done
for pf in 0 1056; do
    for dl in 1 0; do
        HEARTH_DL_PREFETCH=$pf HEARTH_DECODE_LAYERS=$dl timeout 60 /tmp/b/hearth run /tmp/l8b-q4_0.gguf \
            "The quick brown fox jumps over the lazy dog." --temp 0 -n 200 --device cuda >/tmp/greedy$dl.txt 2>/tmp/greedy$dl.err
    done
    cmp -s /tmp/greedy0.txt /tmp/greedy1.txt && echo "q4_0 greedy text identical (prefetch $pf)" ||
        { echo "q4_0 greedy DIFFERS (prefetch $pf)"; tail -2 /tmp/greedy1.err; }
done
for pf in 0 1056; do
    h "HEARTH_DL_PREFETCH=$pf bench_model_st q4_0 (stamps)"
    HEARTH_DL_PREFETCH=$pf timeout 60 /tmp/b/bench_model_st /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode|^decode_layers stamps|^  "
done
case "$gpu" in
*H200*)
    for t in bf16 q8_0 q4_0; do
        for dl in 1 0; do
            h "HEARTH_DECODE_LAYERS=$dl bench_model /tmp/l8b-$t.gguf --prompt 512 --gen 128 --prefill 512,2048 --reps 2"
            HEARTH_DECODE_LAYERS=$dl timeout 60 /tmp/b/bench_model /tmp/l8b-$t.gguf --prompt 512 --gen 128 \
                --prefill 512,2048 --reps 2 2>&1 | grep -E "^(copy|prefill|decode|roofline)"
        done
    done
    h "hearth bench --parallel 512 --prompt 1000 --gen 1000 --kv-type fp8"
    timeout 150 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 2>&1 |
        grep -E "^engine" ;;
esac
h done

#!/usr/bin/env bash
# session 60's first call (carry [".dev"]): bench_model_prev = HEAD 09c8213's decode (3847abf's build,
# PTX-identical); bench_model_pick = the pick change alone (pick-wave-dl); bench_model, hearth, test_cuda = the pick
# change and the launch reading its token's embedding (dlembed). The tests (pick, decode_layers, the CUDA engine),
# then bench_model HEAD / pick / both alternated, the knobs off once, bench_pick, one served stream; what fits
cd "$(dirname "$0")/../.."  # kept as .dev/s60.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
B=/tmp/b
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && echo "$gpu"
hdr() { echo "## $(date +%T) $*"; }
T0=$(date +%s)
left() { [ $(($(date +%s) - T0)) -lt $((${1:-540} * 7 / 10)) ]; } # what still fits the call
mk() { [ -s /tmp/l8b-$1.gguf ] || python3 tools/bench/make_llama_gguf.py /tmp/l8b-$1.gguf --type $1 \
    $([ $1 = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1; }
OFF="HEARTH_PICK_PARTS=0 HEARTH_PICK_DL=0 HEARTH_DL_EMBED=0"
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tail -40 ;;
esac
(mk q4_0 & mk q8_0 & wait) &
hdr "test_cuda pick"
timeout 120 $B/test_cuda pick 2>&1 | tail -9
hdr "test_cuda decode_layers"
timeout 150 $B/test_cuda decode_layers 2>&1 | tail -14
hdr "test_cuda engine"
left 150 && timeout 100 $B/test_cuda engine 2>&1 | grep -vE "^ok " | tail -12
wait
ls -la /tmp/l8b-*.gguf
run_bm() { # type, variant, context, gen
    local b=bench_model_$2 set=""
    [ $2 = new ] && b=bench_model
    [ $2 = off ] && b=bench_model && set="$OFF"
    hdr "$2: $set $b /tmp/l8b-$1.gguf --prompt $3 --gen $4 --prefill 512 --reps 1"
    env $set timeout 60 $B/$b /tmp/l8b-$1.gguf --prompt $3 --gen $4 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
}
for t in q4_0 q8_0; do
    for i in 1 2; do
        for v in prev pick new off; do
            [ $v = off ] && [ $i = 2 ] && continue
            left 480 && run_bm $t $v 512 128
        done
    done
done
for pp in 1 0; do
    left 470 || break
    hdr "HEARTH_PICK_PARTS=$pp bench_pick --reps 20"
    HEARTH_PICK_PARTS=$pp timeout 60 $B/bench_pick --reps 20 2>&1 | head -24
done
for i in 1 2; do
    for set in "" "$OFF"; do
        left 500 || break 2
        hdr "$set hearth bench /tmp/l8b-q4_0.gguf --device cuda --prompt 512 --gen 512 --parallel 1"
        env $set timeout 60 $B/hearth bench /tmp/l8b-q4_0.gguf --device cuda --prompt 512 --gen 512 --parallel 1 2>&1 |
            grep -E "^engine" | head -3
    done
done
left 470 && mk bf16 && for i in 1 2; do for v in prev new; do left 540 && run_bm bf16 $v 512 128; done; done
for i in 1 2; do for v in prev new; do left 550 && run_bm q4_0 $v 3000 64; done; done
hdr done

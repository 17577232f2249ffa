#!/usr/bin/env bash
# session 61's first call (carry [".dev"]): bench_model_prev / hearth_prev = HEAD 6654a57; bench_model, hearth,
# test_cuda = steps issued one ahead (the engine and bench_model; HEARTH_ENGINE_AHEAD=0 / --ahead 0 turn it off).
# The tests (pick: the ids; engine: batched against serial with steps ahead), then the three alternated.
cd "$(dirname "$0")/../.."  # kept as .dev/s61.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
B=/tmp/b
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && echo "$gpu"
hdr() { echo "## $(date +%T) $*"; }
T0=$(date +%s)
left() { [ $(($(date +%s) - T0)) -lt ${1:-540} ]; } # what still fits the call
mk() { [ -s /tmp/l8b-$1.gguf ] || python3 tools/bench/make_llama_gguf.py /tmp/l8b-$1.gguf --type $1 \
    $([ $1 = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1; }
(mk q4_0 & mk q8_0 & wait) &
hdr "test_cuda pick"
timeout 120 $B/test_cuda pick 2>&1 | tail -7
hdr "test_cuda engine"
timeout 150 $B/test_cuda engine 2>&1 | grep -vE "^ok " | tail -14
wait
ls -la /tmp/l8b-*.gguf
run_bm() { # type, variant (prev, a0, a1), context, gen
    local b=bench_model ah=1
    [ $2 = prev ] && b=bench_model_prev && ah=""
    [ $2 = a0 ] && ah=0
    hdr "$2: $b /tmp/l8b-$1.gguf --prompt $3 --gen $4 --prefill 512 --reps 1 ${ah:+--ahead $ah}"
    timeout 60 $B/$b /tmp/l8b-$1.gguf --prompt $3 --gen $4 --prefill 512 --reps 1 ${ah:+--ahead $ah} 2>&1 |
        grep -E "^decode|^host"
}
for i in 1 2 3; do for t in q4_0 q8_0; do for v in prev a0 a1; do left 300 && run_bm $t $v 512 128; done; done; done
run_hb() { # variant, type, parallel, prompt, gen
    local b=hearth set=""
    [ $1 = prev ] && b=hearth_prev
    [ $1 = a0 ] && set="HEARTH_ENGINE_AHEAD=0"
    hdr "$1: $set $b bench /tmp/l8b-$2.gguf --device cuda --prompt $4 --gen $5 --parallel $3"
    env $set timeout 90 $B/$b bench /tmp/l8b-$2.gguf --device cuda --prompt $4 --gen $5 --parallel $3 2>&1 |
        grep -E "^engine" | head -4
}
for i in 1 2; do for v in prev a0 a1; do left 400 && run_hb $v q4_0 1 512 256; done; done
for v in prev a0 a1; do left 430 && run_hb $v q4_0 64 128 128; done
left 440 && mk bf16 && for i in 1 2; do for v in prev a1; do left 500 && run_bm bf16 $v 512 128; done; done
case "$gpu" in
*H200*) left 430 && bash tools/bench/device_run.sh issue6 2>&1 | tail -6 ;;
esac
hdr done

#!/usr/bin/env bash
# session 61's last call: on an H200 issue7 / issue6 first (HEAD); then the final build (steps ahead, the staging
# halves only while a step is in flight) against HEAD 6654a57 (prev) and itself with it off (a0): bench_model after
# 512 and one served stream, Q4_0
cd "$(dirname "$0")/../.."  # kept as .dev/s61c.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
B=/tmp/b
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && echo "$gpu"
hdr() { echo "## $(date +%T) $*"; }
T0=$(date +%s)
left() { [ $(($(date +%s) - T0)) -lt ${1:-540} ]; }
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tail -45 ;;
esac
[ -s /tmp/l8b-q4_0.gguf ] || python3 tools/bench/make_llama_gguf.py /tmp/l8b-q4_0.gguf --type q4_0 --output-type q6_K \
    >/dev/null 2>&1
run_bm() { # variant (prev, a0, a1)
    local b=bench_model ah=1
    [ $1 = prev ] && b=bench_model_prev && ah=""
    [ $1 = a0 ] && ah=0
    hdr "$1: $b /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 ${ah:+--ahead $ah}"
    timeout 60 $B/$b /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 ${ah:+--ahead $ah} 2>&1 |
        grep -E "^decode"
}
run_hb() { # variant
    local b=hearth set=""
    [ $1 = prev ] && b=hearth_prev
    [ $1 = a0 ] && set="HEARTH_ENGINE_AHEAD=0"
    hdr "$1: $set $b bench /tmp/l8b-q4_0.gguf --device cuda --prompt 512 --gen 256 --parallel 1"
    env $set timeout 60 $B/$b bench /tmp/l8b-q4_0.gguf --device cuda --prompt 512 --gen 256 --parallel 1 2>&1 |
        grep -E "^engine" | sed -n '2,3p'
}
for i in 1 2 3; do for v in prev a0 a1; do left 480 && run_bm $v; done; done
for i in 1 2 3; do for v in prev a0 a1; do left 520 && run_hb $v; done; done
hdr done

#!/usr/bin/env bash
# session 62's first call (carry [".dev"]): hearth_head / bench_model_head = HEAD 60093e8; hearth, test_cuda,
# bench_model = HEAD + steps ahead with arrivals (notes/patches/engine-ahead-arrivals.patch applied).
# On an H200 issue7 / issue6 first; test_cuda engine; 64 slots of 256 requests (arrivals while decoding) and 256
# streams 1000 / 1000, head against the patch; then session 61's unrun A/B (bench_model head / a0 / a1 and one
# served Q4_0 stream).
cd "$(dirname "$0")/../.."  # kept as .dev/s62.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
B=/tmp/b
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && echo "$gpu"
hdr() { echo "## $(date +%T) $*"; }
T0=$(date +%s)
LIMIT=${LIMIT:-600}
left() { [ $(($(date +%s) - T0)) -lt $((${1:-540} * LIMIT / 600)) ]; }
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tail -45 ;;
esac
mk() { [ -s /tmp/l8b-$1.gguf ] || python3 tools/bench/make_llama_gguf.py /tmp/l8b-$1.gguf --type $1 \
    $([ $1 = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1; }
(mk bf16; mk q4_0) &
hdr "test_cuda engine"
timeout 150 $B/test_cuda engine 2>&1 | grep -vE "^ok |^hearth info" | tail -14
wait
ls -la /tmp/l8b-*.gguf
run_hb() { # variant (head, a0, a1), type, then bench's args
    local v=$1 t=$2 b=hearth set=""; shift 2
    [ $v = head ] && b=hearth_head
    [ $v = a0 ] && set="HEARTH_ENGINE_AHEAD=0"
    hdr "$v: $set $b bench l8b-$t $*"
    env $set timeout 90 $B/$b bench /tmp/l8b-$t.gguf --device cuda "$@" 2>&1 | grep -E "^engine" | head -4
}
for i in 1 2; do for v in head a1; do
    left 200 && run_hb $v bf16 --prompt 128 --gen 128 --parallel 64 --requests 256
done; done
for v in a1 head; do left 260 && run_hb $v bf16 --prompt 1000 --gen 1000 --parallel 256 --kv-type fp8; done
left 330 && run_hb a1 bf16 --prompt 1000 --gen 1000 --parallel 128 --requests 384 --kv-type fp8
left 360 && run_hb head bf16 --prompt 1000 --gen 1000 --parallel 128 --requests 384 --kv-type fp8
run_bm() { # variant (head, a0, a1)
    local b=bench_model ah=1
    [ $1 = head ] && b=bench_model_head && ah=""
    [ $1 = a0 ] && ah=0
    hdr "$1: $b l8b-q4_0 --prompt 512 --gen 128 --prefill 512 --reps 1 ${ah:+--ahead $ah}"
    timeout 60 $B/$b /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 ${ah:+--ahead $ah} 2>&1 |
        grep -E "^decode"
}
for i in 1 2; do for v in head a0 a1; do left 480 && run_bm $v; done; done
for i in 1 2; do for v in head a1; do left 530 && run_hb $v q4_0 --prompt 512 --gen 256 --parallel 1; done; done
hdr done

#!/usr/bin/env bash
# session 61's later call: on an H200 issue7 / issue6 first; test_cuda pick (the ids test, one recorded sequence a
# case) and engine (the staging halves taken only while a download is in flight); the TTFT at 256 streams with
# steps ahead and without, from a build that prints each step (hearth_dbg: time, tokens, logit rows, first tokens,
# ahead / more, running, waiting, mailbox); 64 slots of 256 requests (waiting with every slot taken) a0 / a1
cd "$(dirname "$0")/../.."  # kept as .dev/s61b.sh too (cd "$(dirname "$0")/..")
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
[ -s /tmp/l8b-bf16.gguf ] || python3 tools/bench/make_llama_gguf.py /tmp/l8b-bf16.gguf --type bf16 >/dev/null 2>&1 &
hdr "test_cuda pick"
timeout 120 $B/test_cuda pick 2>&1 | grep -v "^ok " | tail -6
hdr "test_cuda engine"
timeout 150 $B/test_cuda engine 2>&1 | grep -vE "^ok |^hearth info" | tail -6
wait
for a in 1 0; do
    left 420 || break
    hdr "HEARTH_ENGINE_AHEAD=$a hearth_dbg bench l8b-bf16 --prompt 1000 --gen 1000 --parallel 256 --kv-type fp8"
    HEARTH_ENGINE_AHEAD=$a timeout 110 $B/hearth_dbg bench /tmp/l8b-bf16.gguf --device cuda --prompt 1000 --gen 1000 \
        --parallel 256 --kv-type fp8 2>$OUT/dbg-ahead$a.txt | grep -E "^engine" | head -3
    grep DBG $OUT/dbg-ahead$a.txt | head -40
    echo "steps: $(grep -c DBG $OUT/dbg-ahead$a.txt), with more: $(grep -c 'more 1' $OUT/dbg-ahead$a.txt)"
done
for i in 1 2; do for v in prev a0 a1; do
    left 520 || break 2
    b=hearth; set=""; [ $v = prev ] && b=hearth_prev; [ $v = a0 ] && set="HEARTH_ENGINE_AHEAD=0"
    hdr "$v: $set $b bench l8b-bf16 --prompt 128 --gen 128 --parallel 64 --requests 256"
    env $set timeout 60 $B/$b bench /tmp/l8b-bf16.gguf --device cuda --prompt 128 --gen 128 --parallel 64 \
        --requests 256 2>&1 | grep -E "^engine" | head -4
done; done
hdr done

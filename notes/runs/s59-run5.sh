#!/usr/bin/env bash
# session 59's fifth call (carry [".dev"]; the standard set packed at f57c659, synccap and kvbulk landed): the issue's
# table (device_run.sh issue7, and issue6 on an H200: decode after 512, the roofline share, prefill 512 / 2048), then one served stream
# through the engine (hearth bench --parallel 1) with the landed wait cap and with HEARTH_DL_SYNCCAP=2 (the cap
# before it) alternated, and Q8_0 after 3000 at HEARTH_DL_INFLIGHT=3
cd "$(dirname "$0")/../.."  # kept as .dev/s59e.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
B=/tmp/b
hdr() { echo "## $(date +%T) $*"; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 ;;
*) bash tools/bench/device_run.sh issue7 2>&1 ;;
esac
for t in q4_0 q8_0; do
    for i in 1 2; do
        for set in "" HEARTH_DL_SYNCCAP=2; do
            hdr "$set hearth bench /tmp/l8b-$t.gguf --device cuda --prompt 512 --gen 512 --parallel 1"
            env $set timeout 90 $B/hearth bench /tmp/l8b-$t.gguf --device cuda --prompt 512 --gen 512 --parallel 1 2>&1 |
                grep -E "^engine" | head -3
        done
    done
done
for i in 1 2; do
    for set in "" HEARTH_DL_INFLIGHT=3; do
        hdr "$set bench_model /tmp/l8b-q8_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
        env $set timeout 60 $B/bench_model /tmp/l8b-q8_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
    done
done
hdr done

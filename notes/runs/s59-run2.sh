#!/usr/bin/env bash
# session 59's second call (carry [".dev"]; packed at 5934c0a (kvbulk landed) with bpipe, bpipel2, claim2 and
# synccap beside; stamps for prev / bpipe / synccap): on an H200 the goals first (issue7 issue6); the variants'
# tests at both grids, after 512 (synccap also at HEARTH_DL_SYNCCAP=2, HEAD's cap, and 0, no cap), after 3000
# and 4000 (the pipelined tiles), the stamps
cd "$(dirname "$0")/../.."  # kept as .dev/s59b.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && echo "$gpu"
cp /tmp/b/bench_model_prev /tmp/b/bench_model
hdr() { echo "## $(date +%T) $*"; }
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s59-h200.log | tail -40 ;;
esac
VARIANT_ENVS="synccap:HEARTH_DL_SYNCCAP=2 synccap:HEARTH_DL_SYNCCAP=0" bash tools/bench/device_run.sh variants 2>&1
for t in q4_0 q8_0 bf16; do
    for b in bench_model_prev bench_model_bpipe bench_model_bpipel2 bench_model_synccap; do
        hdr "$b /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
        timeout 60 /tmp/b/$b /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
    done
done
for b in bench_model_prev bench_model_bpipe bench_model_bpipel2 bench_model_prev bench_model_bpipe bench_model_bpipel2; do
    hdr "$b /tmp/l8b-q4_0.gguf --prompt 4000 --gen 64 --prefill 512 --reps 1"
    timeout 60 /tmp/b/$b /tmp/l8b-q4_0.gguf --prompt 4000 --gen 64 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
done
for v in prev bpipe synccap; do
    hdr "stamps_$v /tmp/l8b-q4_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
    timeout 60 /tmp/b/stamps_$v /tmp/l8b-q4_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode|^decode_layers stamps|^  " | grep -vE "^\s+prod"
done
hdr done

#!/usr/bin/env bash
# session 59's fourth call (carry [".dev"]; packed at 3847abf (synccap) with kvrows, bpipe2 and act16bf beside,
# stamps for HEAD and kvrows): on an H200 the goals first (issue7 issue6); the variants' tests at both grids; after
# 512 (HEAD also at HEARTH_DL_INFLIGHT=3 for Q8_0), after 3000 and 4000 (the later tiles), the stamps after 3000
cd "$(dirname "$0")/../.."  # kept as .dev/s59d.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && echo "$gpu"
cp $B/bench_model_prev $B/bench_model
hdr() { echo "## $(date +%T) $*"; }
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s59-h200.log | tail -40 ;;
esac
LAYERS_TYPES="q4_0 q8_0 bf16" bash tools/bench/device_run.sh variants 2>&1 | grep -vE "^  (qkv|attn|merge|o |gu|down|prod|step)"
for i in 1 2; do
    for set in "" HEARTH_DL_INFLIGHT=3; do
        hdr "$set bench_model_prev /tmp/l8b-q8_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1"
        env $set timeout 60 $B/bench_model_prev /tmp/l8b-q8_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
    done
done
for ctx in 3000 4000; do
    for t in q4_0 q8_0; do
        for i in 1 2; do
            for b in bench_model_prev bench_model_kvrows bench_model_bpipe2; do
                hdr "$b /tmp/l8b-$t.gguf --prompt $ctx --gen 64 --prefill 512 --reps 1"
                timeout 60 $B/$b /tmp/l8b-$t.gguf --prompt $ctx --gen 64 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
            done
        done
    done
done
for v in prev kvrows bpipe2; do
    hdr "stamps_$v /tmp/l8b-q4_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
    timeout 60 $B/stamps_$v /tmp/l8b-q4_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode|^decode_layers stamps|^  " | grep -vE "^\s+prod"
done
hdr done

#!/usr/bin/env bash
# session 59's third call (carry [".dev"]; packed at 3372df0 (synccap landed) with claim2 and syncmask beside, HEAD's
# test_cuda and stamps): on an H200 the goals first (issue7 issue6); the tests (HEAD also with HEARTH_DL_SYNCCAP=-1,
# the pause); after 512 HEAD at its defaults, paused (-1), streaming cap 3, claim2, and syncmask's waits one group
# at a time; after 3000; the stamps
cd "$(dirname "$0")/../.."  # kept as .dev/s59c.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && echo "$gpu"
cp $B/bench_model_prev $B/bench_model
hdr() { echo "## $(date +%T) $*"; }
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s59-h200.log | tail -40 ;;
esac
for c in "test_cuda:" "test_cuda:HEARTH_DL_SYNCCAP=-1" "test_cuda_claim2:" "test_cuda_syncmask:HEARTH_DL_SYNCMASK=5"; do
    for g in 0 100; do
        hdr "HEARTH_DL_GRID=$g ${c#*:} ${c%%:*} decode_layers"
        env HEARTH_DL_GRID=$g ${c#*:} timeout 60 $B/${c%%:*} decode_layers 2>&1 | tail -1
    done
done
for t in q4_0 q8_0 bf16; do
    f=/tmp/l8b-$t.gguf
    [ -s "$f" ] || timeout 120 python3 tools/bench/make_llama_gguf.py "$f" --type $t \
        $([ $t = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1
done
runs="prev: prev:HEARTH_DL_SYNCCAP=-1 prev:HEARTH_DL_INFLIGHT=3 claim2: syncmask:HEARTH_DL_SYNCMASK=1
syncmask:HEARTH_DL_SYNCMASK=14 syncmask:HEARTH_DL_SYNCMASK=8"
for t in q4_0 q8_0 bf16; do
    extra=; [ $t = bf16 ] && extra="prev:HEARTH_DL_SYNCCAP=1"
    for i in 1 2; do
        for r in $runs $extra; do
            b=bench_model_${r%%:*} set=${r#*:}
            hdr "$set $b /tmp/l8b-$t.gguf --prompt 512 --gen 128 --prefill 512 --reps 1"
            env $set timeout 60 $B/$b /tmp/l8b-$t.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
        done
    done
done
for t in q4_0 q8_0 bf16; do
    for r in prev: prev:HEARTH_DL_SYNCCAP=-1 claim2:; do
        b=bench_model_${r%%:*} set=${r#*:}
        hdr "$set $b /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
        env $set timeout 60 $B/$b /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
    done
done
for set in "" HEARTH_DL_SYNCCAP=-1; do
    hdr "$set stamps_prev /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1"
    env $set timeout 60 $B/stamps_prev /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode|^decode_layers stamps|^  "
done
hdr done

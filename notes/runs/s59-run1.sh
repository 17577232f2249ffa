#!/usr/bin/env bash
# session 59's first call (carry [".dev"]; packed at 18a5443 with kvbulk, xtag and xtagatt beside (PACK_ONLY=1:
# hearth, test_cuda, the variants, stamps for prev / xtag / xtagatt) and the CUPTI tracer): HEAD's test (qsw removed, not yet run); on an H200 the goals
# first (issue7 issue6); the variants after 512 and 3000; a traced Q4_0 decode's decode phase
cd "$(dirname "$0")/../.."  # kept as .dev/s59.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && echo "$gpu"
cp /tmp/b/bench_model_prev /tmp/b/bench_model
hdr() { echo "## $(date +%T) $*"; }
for g in 0 100; do
    hdr "HEARTH_DL_GRID=$g test_cuda decode_layers (HEAD)"
    HEARTH_DL_GRID=$g timeout 60 /tmp/b/test_cuda decode_layers 2>&1 | tail -3
done
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s59-h200.log | tail -40 ;;
esac
bash tools/bench/device_run.sh variants 2>&1
for t in q4_0 q8_0 bf16; do
    for b in bench_model_prev bench_model_kvbulk bench_model_xtag bench_model_xtagatt; do
        hdr "$b /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
        timeout 60 /tmp/b/$b /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
    done
done
for v in prev xtag xtagatt; do
    hdr "stamps_$v /tmp/l8b-q4_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
    timeout 60 /tmp/b/stamps_$v /tmp/l8b-q4_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode|^decode_layers stamps|^  " | grep -vE "^\s+prod"
done
hdr "traced: bench_model_prev /tmp/l8b-q4_0.gguf --prompt 512 --gen 64 --prefill 512 --reps 1"
LD_LIBRARY_PATH=/tmp/b CUDA_INJECTION64_PATH=/tmp/b/libhearth_trace.so HEARTH_TRACE_OUT=/tmp/tr.csv \
    timeout 90 /tmp/b/bench_model_prev /tmp/l8b-q4_0.gguf --prompt 512 --gen 64 --prefill 512 --reps 1 2>&1 |
    grep -E "^decode"
timeout 60 python3 tools/prof/timeline.py /tmp/tr.csv --window 60 --phases 6 > $OUT/s59-timeline.txt 2>&1
grep -E "^phase" $OUT/s59-timeline.txt
# the decode: the phase with the most activities after the prefill's (the last of the listed)
awk '/^=== phase/{n++} {blk[n]=blk[n] $0 "\n"} END{printf "%s", blk[n]}' $OUT/s59-timeline.txt | head -100
hdr "test_cuda (HEAD, whole suite; ok lines left out)"
timeout 240 /tmp/b/test_cuda 2>&1 | grep -vE "^ok " | tail -25
hdr done

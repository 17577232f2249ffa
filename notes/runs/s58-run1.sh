#!/usr/bin/env bash
# session 58's first call (carry [".dev"]; packed at 4078fd8 with kvbulk, sct, act16 and claim2 beside, PACK_STAMPS=1,
# and the CUPTI tracer): on an H200 the goals alone (issue7 issue6); on an H100 the variants after 512, then
# HEAD, kvbulk, sct after 3000 positions, and a traced Q4_0 decode (where a token's time outside the layers goes)
cd "$(dirname "$0")/../.."  # kept as .dev/s58.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && echo "$gpu"
hdr() { echo "## $(date +%T) $*"; }
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s58-h200.log | tail -60; exit ;;
esac
VARIANT_ENVS="claim2:HEARTH_DL_INFLIGHT=3" bash tools/bench/device_run.sh variants 2>&1
hdr "traced: bench_model_prev /tmp/l8b-q4_0.gguf --prompt 512 --gen 64 --prefill 512 --reps 1"
LD_LIBRARY_PATH=/tmp/b CUDA_INJECTION64_PATH=/tmp/b/libhearth_trace.so HEARTH_TRACE_OUT=/tmp/tr.csv \
    timeout 90 /tmp/b/bench_model_prev /tmp/l8b-q4_0.gguf --prompt 512 --gen 64 --prefill 512 --reps 1 2>&1 |
    grep -E "^decode"
timeout 60 python3 tools/prof/timeline.py /tmp/tr.csv --window 40 2>&1 | head -120
for t in q4_0 q8_0 bf16; do
    for b in bench_model_prev bench_model_kvbulk bench_model_sct; do
        hdr "$b /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
        timeout 60 /tmp/b/$b /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
    done
done
for v in prev kvbulk sct; do
    hdr "stamps_$v /tmp/l8b-q4_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
    timeout 60 /tmp/b/stamps_$v /tmp/l8b-q4_0.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode|^decode_layers stamps|^  " | grep -vE "^\s+prod"
done
hdr done

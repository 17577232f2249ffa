#!/usr/bin/env bash
# session 56, second call: the producer's copies in flight capped (infl, HEARTH_DL_INFLIGHT) against HEAD; on an
# H200 issue 7 and 6 first
cd "$(dirname "$0")/../.."  # run as .dev/s56.sh (cd "$(dirname "$0")/..") in session 56
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && echo "$gpu"
case "$gpu" in *H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s56-h200.log | tail -40 ;; esac
hdr() { echo "## $(date +%T) $*"; }
m() { # as device_run.sh's model()
    local f=/tmp/l8b-$1.gguf
    [ -s "$f" ] || timeout 120 python3 tools/bench/make_llama_gguf.py "$f" --type "$1" \
        $([ "$1" = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1
    echo "$f"
}
for set in "HEARTH_DL_INFLIGHT=3" "HEARTH_DL_INFLIGHT=2 HEARTH_DL_GRID=100"; do
    hdr "$set test_cuda_infl decode_layers"
    env $set timeout 60 /tmp/b/test_cuda_infl decode_layers 2>&1 | tail -3
done
for t in q4_0 q8_0 bf16; do
    f=$(m $t)
    case $t in q4_0) caps="0 2 3 4 5 6" ;; *) caps="0 3 5" ;; esac
    for i in 1 2; do
        hdr "bench_model_prev $f --prompt 512 --gen 128 --prefill 512 --reps 1"
        timeout 60 /tmp/b/bench_model_prev $f --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
        for c in $caps; do
            hdr "HEARTH_DL_INFLIGHT=$c bench_model_infl $f --prompt 512 --gen 128 --prefill 512 --reps 1"
            HEARTH_DL_INFLIGHT=$c timeout 60 /tmp/b/bench_model_infl $f --prompt 512 --gen 128 --prefill 512 \
                --reps 1 2>&1 | grep -E "^decode"
        done
    done
done
for c in 0 3 5; do
    hdr "HEARTH_DL_INFLIGHT=$c stamps_infl /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1"
    HEARTH_DL_INFLIGHT=$c timeout 60 /tmp/b/stamps_infl /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 \
        --reps 1 2>&1 | grep -E "^decode|^decode_layers stamps|^  "
done
hdr done

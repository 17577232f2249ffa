#!/usr/bin/env bash
# session 56, fourth call: the landed Q4_0 cap (test_cuda decode_layers), HEARTH_DL_INFLIGHT 0 / 2 / 3 on every
# type after 512 and (Q4_0, Q8_0) 3000 positions, dnx against HEAD; on an H200 issue 7 and 6 first
cd "$(dirname "$0")/../.."  # run as .dev/s56b.sh (cd "$(dirname "$0")/..") in session 56
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
hdr "test_cuda decode_layers"
timeout 60 /tmp/b/test_cuda decode_layers 2>&1 | tail -3
hdr "test_cuda_dnx decode_layers"
timeout 60 /tmp/b/test_cuda_dnx decode_layers 2>&1 | tail -1
for t in q4_0 q8_0 bf16; do
    f=$(m $t)
    for i in 1 2; do
        for c in 0 2 3 D; do
            set=HEARTH_DL_INFLIGHT=$c; [ $c = D ] && set=
            hdr "$set bench_model $f --prompt 512 --gen 128 --prefill 512 --reps 1"
            env $set timeout 60 /tmp/b/bench_model $f --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
        done
        hdr "bench_model_dnx $f --prompt 512 --gen 128 --prefill 512 --reps 1"
        timeout 60 /tmp/b/bench_model_dnx $f --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 | grep -E "^decode"
    done
done
for t in q4_0 q8_0; do
    for c in 0 2; do
        hdr "HEARTH_DL_INFLIGHT=$c bench_model /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
        HEARTH_DL_INFLIGHT=$c timeout 60 /tmp/b/bench_model /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 \
            --reps 1 2>&1 | grep -E "^decode"
    done
done
hdr "HEARTH_DL_INFLIGHT=2 bench_model_st /tmp/l8b-q4_0.gguf (stamps)"
HEARTH_DL_INFLIGHT=2 timeout 60 /tmp/b/bench_model_st /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 \
    2>&1 | grep -E "^decode|^decode_layers stamps|^  "
hdr done

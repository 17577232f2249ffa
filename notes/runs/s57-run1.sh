#!/usr/bin/env bash
# for session 57's first call (carry [".dev"]; packed at session 56's last commit): on an H200 issues 7 and 6
# first; then the landed kernel against the op sequence (layers48), and HEARTH_DL_INFLIGHT 0 / 1 / 2 / 3
# alternated twice a type after 512 tokens, the stamps at 1 and 2; then the variants packed beside (xsm; l2pf at
# its default 8 units and at 4 and 16)
cd "$(dirname "$0")/../.."  # kept as .dev/s57.sh too (cd "$(dirname "$0")/..")
export HEARTH_ROOT=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && echo "$gpu"
# within the 600 s a call may run: on an H200 the goals in place of layers48 (~4 min each)
case "$gpu" in
*H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 | tee $OUT/s57-h200.log | tail -40 ;;
*) LAYERS_TYPES="q4_0 q8_0 bf16" bash tools/bench/device_run.sh layers48 2>&1 | grep -vE '^\s+(layer|cuda )' ;;
esac
hdr() { echo "## $(date +%T) $*"; }
for t in q4_0 q8_0 bf16; do
    for i in 1 2; do
        for c in 0 1 2 3; do
            hdr "HEARTH_DL_INFLIGHT=$c bench_model /tmp/l8b-$t.gguf --prompt 512 --gen 128 --prefill 512 --reps 1"
            HEARTH_DL_INFLIGHT=$c timeout 60 /tmp/b/bench_model /tmp/l8b-$t.gguf --prompt 512 --gen 128 --prefill 512 \
                --reps 1 2>&1 | grep -E "^decode"
        done
    done
done
for c in 1 2; do
    hdr "HEARTH_DL_INFLIGHT=$c bench_model_st /tmp/l8b-q4_0.gguf (stamps)"
    HEARTH_DL_INFLIGHT=$c timeout 60 /tmp/b/bench_model_st /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 \
        --reps 1 2>&1 | grep -E "^decode|^decode_layers stamps|^  "
done
VARIANT_ENVS="l2pf:HEARTH_DL_L2PF=4 l2pf:HEARTH_DL_L2PF=16" bash tools/bench/device_run.sh variants 2>&1 |
    grep -vE "^\s+(prod|attn|merge)"
hdr done

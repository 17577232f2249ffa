#!/usr/bin/env bash
# session 57's last call (carry [".dev"], the pack of s57-run6: HEAD efa9fe1's standard set): the landed kernel
# against the op sequence (layers48), then both after 3000 positions; run from the repository root
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && export HEARTH_ROOT=$PWD
LAYERS_TYPES="q4_0 q8_0 bf16" bash tools/bench/device_run.sh layers48 2>&1 | grep -vE '^\s+(layer|cuda )|^t[0-9]'
for t in q4_0 q8_0 bf16; do
    for dl in 0 1; do
        echo "## HEARTH_DECODE_LAYERS=$dl bench_model /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 --reps 1"
        HEARTH_DECODE_LAYERS=$dl timeout 60 /tmp/b/bench_model /tmp/l8b-$t.gguf --prompt 3000 --gen 64 --prefill 512 \
            --reps 1 2>&1 | grep -E "^decode"
    done
done

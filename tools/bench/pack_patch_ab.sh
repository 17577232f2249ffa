#!/usr/bin/env bash
# pack_patch_ab.sh - an A/B of a CUDA patch on the GPU machine in one call: builds this tree's bench_model
# as build/prev/bench_model_prev, applies PATCH (left applied: land it or `git apply -R` it after the run),
# builds the patched binaries and the measurement build, and packs them with the earlier bench_model.
#
#   tools/bench/pack_patch_ab.sh notes/patches/decode-layers-tags.patch
#
# There (carry [".dev"]): bash tools/bench/device_run.sh abprev dlstamps, with test_cuda for the op first,
# e.g. `HEARTH_ROOT=$PWD /tmp/b/test_cuda decode_layers` once device_run.sh has unpacked the binaries.
set -euo pipefail
cd "$(dirname "$0")/../.."
patch=${1:?usage: pack_patch_ab.sh PATCH}
git diff --quiet -- src || { echo "pack_patch_ab: src has changes; the earlier build must be this commit's" >&2; exit 1; }
git apply --check "$patch"
make -j2 all build/bench/cuda/bench_model
mkdir -p build/prev
cp build/bench/cuda/bench_model build/prev/bench_model_prev
git apply "$patch"
make -j2 all build/test_cuda build/bench/cuda/bench_model build/bench/cuda/bench_attn build/bench/cuda/bench_pick \
    build/bench/cuda/bench_persist bench-stamps
PACK_EXTRA=build/prev/bench_model_prev tools/bench/pack_device.sh
echo "pack_patch_ab: $patch is applied; .dev/bin.tar.xz holds it and bench_model_prev (the commit before it)"

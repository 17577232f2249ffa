#!/usr/bin/env bash
# pack_variants.sh - several CUDA patches measured in one device call, each against this commit: builds this
# tree's bench_model (packed as bench_model_prev), then for each PATCH, applied alone, bench_model_NAME and
# test_cuda_NAME (NAME: the file's name without .patch and without a leading "decode-layers-"), in
# build/variants, and packs them (pack_device.sh PACK_ONLY=1, with the shared libraries) as .dev/bin.tar.xz.
# The tree is left as it was (each patch reversed after its build). ~30 s a patch here. PACK_STAMPS=1 also
# packs the stamps builds (`make bench-stamps`) of this commit and of each patch as stamps_prev / stamps_NAME
# (~1 min more a build).
#
#   tools/bench/pack_variants.sh notes/patches/decode-layers-prefetch.patch notes/patches/decode-layers-tags.patch
#
# There (carry [".dev"]): bash tools/bench/device_run.sh variants (VARIANT_ENVS adds runs under a setting).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: pack_variants.sh PATCH..." >&2; exit 1; }
for p in "$@"; do git apply --check "$p"; done
# the files the patches touch: clean before (the baseline is this commit's), restored however the script ends
paths=$(for p in "$@"; do git apply --numstat "$p" | cut -f3; done | sort -u)
git diff --quiet -- $paths || { echo "pack_variants: $paths: changed here; the baseline must be this commit's" >&2; exit 1; }
out=build/variants
trap 'git diff --quiet -- $paths || git checkout -q -- $paths' EXIT
rm -rf "$out" && mkdir -p "$out"
make -j2 all build/bench/cuda/bench_model
cp build/bench/cuda/bench_model "$out/bench_model_prev"
[ "${PACK_STAMPS:-0}" = 1 ] && make bench-stamps && cp build/stamps/bench_model_st "$out/stamps_prev"
for p in "$@"; do
    name=$(basename "$p" .patch)
    name=${name#decode-layers-}
    git apply "$p"
    make -j2 all build/test_cuda build/bench/cuda/bench_model
    cp build/bench/cuda/bench_model "$out/bench_model_$name"
    cp build/test_cuda "$out/test_cuda_$name"
    [ "${PACK_STAMPS:-0}" = 1 ] && make bench-stamps && cp build/stamps/bench_model_st "$out/stamps_$name"
    git apply -R "$p"
done
make -j2 all build/bench/cuda/bench_model # this commit's objects again
PACK_ONLY=1 PACK_EXTRA="$(echo $out/*)" tools/bench/pack_device.sh

#!/usr/bin/env bash
# session 53: packs what notes/runs/s53-run2.sh runs: HEAD's bench_model (bench_model_prev), the two tagged-word
# patches' bench_model_ll / _llact and test_cuda_ll / _llact (pack_variants.sh), and the stamps builds
# (`make bench-stamps`) of HEAD and of llact as build/variants/stamps_prev / stamps_llact, into .dev/bin.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -j2 all build/test_cuda build/bench/cuda/bench_model
tools/bench/pack_variants.sh notes/patches/decode-layers-ll.patch notes/patches/decode-layers-llact.patch
make bench-stamps && cp build/stamps/bench_model_st build/variants/stamps_prev
trap 'git checkout -q -- src/ops/cuda/decode_layers.cu' EXIT
git apply notes/patches/decode-layers-llact.patch
make bench-stamps && cp build/stamps/bench_model_st build/variants/stamps_llact
git checkout -q -- src/ops/cuda/decode_layers.cu
make -j2 all bench-stamps
PACK_ONLY=1 PACK_EXTRA="$(echo build/variants/*)" tools/bench/pack_device.sh
